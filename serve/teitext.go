package serve

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// predictInputs reads /predict's inputs as TEI's untagged types do: a
// string; a pair ["a", "b"]; or an array of those ([["a", "b"]], or
// ["a", "b", "c"]). single tells whether the answer is one list of
// scores or a list of them. The inputs are counted and their kinds
// checked before anything is decoded.
func predictInputs(raw json.RawMessage) (texts, pairs []string, single bool, err error) {
	raw = bytes.TrimSpace(raw)
	bad := unprocessable("inputs: want a string, a pair [a, b], or an array of those")
	if len(raw) == 0 || raw[0] != '[' {
		texts, single, err = teiInputs(raw)
		return texts, nil, single, err
	}
	var first []byte
	n := eachElement(raw, func(e []byte) bool { first = e; return false })
	switch {
	case n == 0:
		return nil, nil, false, bad
	case first[0] == '"':
		if texts, _, err = teiInputs(raw); err == nil && len(texts) == 2 {
			return texts[:1], texts[1:], true, nil
		}
		return texts, nil, false, err
	}
	if n = countElements(raw); n > MaxEmbeddingInputs {
		return nil, nil, false, tooManyInputs(n)
	}
	pairsOK := true
	eachElement(raw, func(e []byte) bool {
		pairsOK = e[0] == '[' && allStrings(e) && countElements(e) == 2
		return pairsOK
	})
	var batch [][2]string
	if !pairsOK || json.Unmarshal(raw, &batch) != nil {
		return nil, nil, false, unprocessable("inputs: want a string, a pair [a, b], or an array of those (pairs of 2 texts each)")
	}
	for _, p := range batch {
		texts, pairs = append(texts, p[0]), append(pairs, p[1])
	}
	return texts, pairs, false, nil
}

// label names class i.
func (t *TextModel) label(i int) string {
	if i < len(t.Labels) {
		return t.Labels[i]
	}
	return "LABEL_" + strconv.Itoa(i)
}

func (s *Server) teiPredict(w http.ResponseWriter, r *http.Request, m *model) (int, error) {
	var req struct {
		Inputs              json.RawMessage `json:"inputs"`
		Truncate            bool            `json:"truncate"`
		TruncationDirection string          `json:"truncation_direction"`
		RawScores           bool            `json:"raw_scores"`
	}
	if err := s.decodeTEI(w, r, &req); err != nil {
		return 0, err
	}
	texts, pairs, single, err := predictInputs(req.Inputs)
	if err == nil && pairs == nil && m.text.Pair {
		err = unprocessable("model %s reads pairs: send [query, passage]", m.name)
	}
	if err != nil {
		return 0, err
	}
	// The head's probabilities, or the logits (raw, or one logit's
	// sigmoid, below).
	outputs := []string{"logits"}
	if !req.RawScores && hasOutput(m, "probabilities") {
		outputs = []string{"probabilities"}
	}
	resp, err := s.runText(r, m, texts, pairs, req.Truncate, req.TruncationDirection, outputs...)
	if err != nil {
		return 0, err
	}
	rows, err := floats(resp, outputs[0])
	if err != nil {
		return 0, err
	}
	type prediction struct {
		Score float32 `json:"score"`
		Label string  `json:"label"`
	}
	answer := make([][]prediction, len(rows))
	for i, row := range rows {
		for k, v := range row {
			if len(row) == 1 && !req.RawScores {
				v = sigmoid(v)
			}
			answer[i] = append(answer[i], prediction{Score: v, Label: m.text.label(k)})
		}
		slices.SortStableFunc(answer[i], func(a, b prediction) int { return cmp.Compare(b.Score, a.Score) })
	}
	if single {
		writeJSON(w, http.StatusOK, answer[0])
	} else {
		writeJSON(w, http.StatusOK, answer)
	}
	return http.StatusOK, nil
}

func hasOutput(m *model, name string) bool {
	return slices.ContainsFunc(m.outputs, func(t TensorMetadata) bool { return t.Name == name })
}

func (s *Server) teiTokenize(w http.ResponseWriter, r *http.Request, m *model) (int, error) {
	var req struct {
		Inputs           json.RawMessage `json:"inputs"`
		AddSpecialTokens *bool           `json:"add_special_tokens"`
		PromptName       *string         `json:"prompt_name"`
	}
	if err := s.decodeTEI(w, r, &req); err != nil {
		return 0, err
	}
	if req.PromptName != nil {
		return 0, unprocessable("prompt_name %q: this model has no prompts", *req.PromptName)
	}
	texts, _, err := teiInputs(req.Inputs)
	if err != nil {
		return 0, err
	}
	type token struct {
		ID      int64  `json:"id"`
		Text    string `json:"text"`
		Special bool   `json:"special"`
		Start   *int   `json:"start"`
		Stop    *int   `json:"stop"`
	}
	special := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	answer := make([][]token, len(texts))
	encs, err := m.encode(texts, nil, false)
	if err != nil {
		return 0, err
	}
	for i, text := range texts {
		e := encs[i]
		spans := byteSpans(text, e.Offsets)
		answer[i] = []token{}
		for k, id := range e.IDs {
			if e.Special[k] {
				if special {
					answer[i] = append(answer[i], token{ID: id, Text: e.Tokens[k], Special: true})
				}
				continue
			}
			start, stop := spans[k][0], spans[k][1]
			answer[i] = append(answer[i], token{ID: id, Text: text[start:stop], Start: &start, Stop: &stop})
		}
	}
	writeJSON(w, http.StatusOK, answer)
	return http.StatusOK, nil
}

func (s *Server) teiInfo(w http.ResponseWriter, _ *http.Request, m *model) (int, error) {
	labels := func() map[string]any {
		id2label, label2id := map[string]string{}, map[string]int{}
		width := max(len(m.text.Labels), 1)
		for i := range width {
			id2label[strconv.Itoa(i)] = m.text.label(i)
			label2id[m.text.label(i)] = i
		}
		return map[string]any{"id2label": id2label, "label2id": label2id}
	}
	var kind map[string]any
	switch {
	case hasOutput(m, embeddingOutput):
		kind = map[string]any{"embedding": map[string]any{"pooling": m.text.Pooling}}
	case m.text.Pair:
		kind = map[string]any{"reranker": labels()}
	default:
		kind = map[string]any{"classifier": labels()}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model_id": m.name, "model_sha": nil, "model_dtype": "float32", "model_type": kind,
		"max_input_length": m.text.MaxLength, "max_client_batch_size": MaxEmbeddingInputs, "auto_truncate": false,
		"tokenization_workers": 0, "version": s.cfg.version,
	})
	return http.StatusOK, nil
}
