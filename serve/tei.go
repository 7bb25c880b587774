package serve

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Text Embeddings Inference's endpoints: /embed, /rerank, /predict,
// /tokenize and /info, in TEI's request and answer shapes and statuses
// (413 for too many inputs, 422 for an input TEI would not take, such as
// a text over the model's length without truncate), on the same batcher,
// windows and shapes as the other protocols. TEI serves one model: so
// does /embed on a server of one text model; /tei/{model}/embed names one
// on any server (a TEI client's base URL is then .../tei/{model}).

// teiError is TEI's error body.
type teiError struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// unprocessable is a request TEI answers 422, as any invalid one.
func unprocessable(format string, args ...any) error {
	return invalid(fmt.Errorf(format, args...))
}

// writeTEIError answers an error in TEI's shape and statuses.
func writeTEIError(w http.ResponseWriter, err error) int {
	retryAfter(w, err)
	status, kind := httpStatus[codeOf(err)], "Validation"
	switch {
	case codeOf(err) == CodeInvalid:
		status = http.StatusUnprocessableEntity
	case codeOf(err) == CodeOverloaded:
		kind = "Overloaded"
	case codeOf(err) == CodeInternal:
		status, kind = http.StatusFailedDependency, "Backend"
	case codeOf(err) == CodeUnavailable:
		kind = "Unhealthy"
	case codeOf(err) == CodeUnauthenticated:
		kind = "Unauthorized"
	}
	writeJSON(w, status, teiError{Error: err.Error(), ErrorType: kind})
	return status
}

// teiRoutes adds the endpoints, at the root and under /tei/{model}.
func (s *Server) teiRoutes(mux *router) {
	for path, h := range map[string]func(http.ResponseWriter, *http.Request, *model) (int, error){
		"POST /embed": s.teiEmbed, "POST /rerank": s.teiRerank, "POST /predict": s.teiPredict,
		"POST /tokenize": s.teiTokenize, "GET /info": s.teiInfo,
	} {
		handler := s.tei(h)
		method, rest, _ := bytes.Cut([]byte(path), []byte(" "))
		mux.HandleFunc(path, handler)
		mux.HandleFunc(string(method)+" /tei/{model}"+string(rest), handler)
	}
	// TEI's root route, which a client given an endpoint URL posts to
	// (Hugging Face's inference client): the model's own kind of answer.
	root := s.tei(s.teiRoot)
	mux.HandleFunc("POST /{$}", root)
	mux.HandleFunc("POST /tei/{model}", root)
	mux.HandleFunc("POST /tei/{model}/{$}", root)
}

// teiRoot answers as /embed for an embedding model, /rerank for a
// reranker and /predict for a classifier.
func (s *Server) teiRoot(w http.ResponseWriter, r *http.Request, m *model) (int, error) {
	switch {
	case hasOutput(m, embeddingOutput):
		return s.teiEmbed(w, r, m)
	case m.text.Pair:
		return s.teiRerank(w, r, m)
	}
	return s.teiPredict(w, r, m)
}

// tei finds the request's text model and answers through h.
func (s *Server) tei(h func(http.ResponseWriter, *http.Request, *model) (int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		name := r.PathValue("model")
		m, err := s.textModel(name)
		status := 0
		if err == nil {
			name = m.name
			status, err = h(w, r, m)
		}
		if err != nil {
			status = writeTEIError(w, err)
		}
		s.finish(r.Context(), "tei", name, strconv.Itoa(status), r.RemoteAddr, nil, nil, time.Since(began), err)
	}
}

// textModel returns the model name names, or the server's one text
// model when name is "".
func (s *Server) textModel(name string) (*model, error) {
	if name != "" {
		m, err := s.lookup(name, "")
		if err == nil && m.text == nil {
			err = unprocessable("model %s %v", name, errNoTokenizer)
		}
		return m, err
	}
	var found []*model
	for _, n := range s.reg.names() {
		if m, err := s.lookup(n, ""); err == nil && m.text != nil {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, &Error{Code: CodeNotFound, Err: errors.New("the server has no model that reads text")}
	}
	return nil, unprocessable("the server has %d text models: name one, /tei/{model}/...", len(found))
}

// teiInputs reads TEI's inputs: a string, or an array of strings (single
// tells which, as the answer's shape follows it); at most
// MaxEmbeddingInputs (413 past it), counted and checked to be strings
// before anything is decoded.
func teiInputs(raw json.RawMessage) (texts []string, single bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var t string
		err := json.Unmarshal(raw, &t)
		return []string{t}, true, err
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false, unprocessable("inputs: want a string or a non-empty array of strings")
	}
	if n := countElements(raw); n > MaxEmbeddingInputs {
		return nil, false, tooManyInputs(n)
	}
	if !allStrings(raw) || json.Unmarshal(raw, &texts) != nil || len(texts) == 0 {
		return nil, false, unprocessable("inputs: want a string or a non-empty array of strings")
	}
	return texts, false, nil
}

// tooManyInputs is TEI's answer to a batch over its bound.
func tooManyInputs(n int) error {
	return &Error{Code: CodeTooLarge, Err: fmt.Errorf("batch size %d > maximum allowed batch size %d", n, MaxEmbeddingInputs)}
}

// runText infers outputs of texts (and pairs) on m, each text encoded
// once: without truncate a text longer than the model keeps is refused,
// as TEI does; with it, the model's tokenizer cuts its right end.
func (s *Server) runText(r *http.Request, m *model, texts, pairs []string, truncate bool, direction string, outputs ...string) (*inferResponse, error) {
	if err := checkDirection(direction); err != nil {
		return nil, err
	}
	encs, err := m.encode(texts, pairs, !truncate)
	if err != nil {
		return nil, err
	}
	return s.infer(r.Context(), &inferRequest{model: m.name, version: m.version, outputs: outputs, inputs: m.tokenInputs(encs)})
}

// checkDirection refuses a truncation TEI's client asks that the
// model's tokenizer does not do.
func checkDirection(direction string) error {
	if direction != "" && direction != "Right" {
		return unprocessable("truncation_direction %q: this model's tokenizer truncates on the right", direction)
	}
	return nil
}

// floats returns an output's rows of FP32 values.
func floats(resp *inferResponse, name string) ([][]float32, error) {
	for _, out := range resp.outputs {
		if out.name != name {
			continue
		}
		vals, ok := out.data.([]float32)
		if !ok {
			break
		}
		width := 1
		if len(out.shape) == 2 {
			width = int(out.shape[1])
		}
		rows := make([][]float32, resp.rows)
		for i := range rows {
			rows[i] = vals[i*width : (i+1)*width]
		}
		return rows, nil
	}
	return nil, &Error{Code: CodeInternal, Err: fmt.Errorf("the model gave no FP32 output %q", name)}
}

func (s *Server) teiEmbed(w http.ResponseWriter, r *http.Request, m *model) (int, error) {
	var req struct {
		Inputs              json.RawMessage `json:"inputs"`
		Normalize           *bool           `json:"normalize"`
		Truncate            bool            `json:"truncate"`
		TruncationDirection string          `json:"truncation_direction"`
		PromptName          *string         `json:"prompt_name"`
		Dimensions          *int            `json:"dimensions"`
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
	if err := checkDirection(req.TruncationDirection); err != nil {
		return 0, err
	}
	// Without truncate, a long text is refused, as TEI does, or pooled
	// from its windows where the model pools them.
	rows, _, err := s.embedTexts(r.Context(), m, texts, req.Truncate, !req.Truncate)
	if err != nil {
		return 0, err
	}
	for i, v := range rows {
		if d := req.Dimensions; d != nil {
			if *d < 1 || *d > len(v) {
				return 0, unprocessable("dimensions %d: the model's embeddings have %d", *d, len(v))
			}
			v = v[:*d]
		}
		if req.Normalize == nil || *req.Normalize {
			v = shorten(v, len(v))
		}
		rows[i] = v
	}
	writeJSON(w, http.StatusOK, rows)
	return http.StatusOK, nil
}

// decodeTEI reads a request's JSON body into v.
func (s *Server) decodeTEI(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return unprocessable("malformed JSON request: %v", err)
	}
	return nil
}

// sigmoid is a cross-encoder's score of its logit.
func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func (s *Server) teiRerank(w http.ResponseWriter, r *http.Request, m *model) (int, error) {
	var req struct {
		Query               string          `json:"query"`
		Texts               json.RawMessage `json:"texts"`
		Truncate            bool            `json:"truncate"`
		TruncationDirection string          `json:"truncation_direction"`
		RawScores           bool            `json:"raw_scores"`
		ReturnText          bool            `json:"return_text"`
	}
	if err := s.decodeTEI(w, r, &req); err != nil {
		return 0, err
	}
	if t := bytes.TrimSpace(req.Texts); len(t) == 0 || t[0] != '[' {
		return 0, unprocessable("texts: want an array of strings")
	}
	texts, _, err := teiInputs(req.Texts)
	switch {
	case err != nil:
		return 0, err
	case !m.text.Pair:
		return 0, unprocessable("model %s is not a reranker (a cross-encoder reading pairs)", m.name)
	}
	queries := make([]string, len(texts))
	for i := range queries {
		queries[i] = req.Query
	}
	resp, err := s.runText(r, m, queries, texts, req.Truncate, req.TruncationDirection, "logits")
	if err != nil {
		return 0, err
	}
	logits, err := floats(resp, "logits")
	if err != nil {
		return 0, err
	}
	type rank struct {
		Index int     `json:"index"`
		Score float32 `json:"score"`
		Text  *string `json:"text,omitempty"`
	}
	ranks := make([]rank, len(logits))
	for i, l := range logits {
		ranks[i] = rank{Index: i, Score: l[0]}
		if !req.RawScores {
			ranks[i].Score = sigmoid(l[0])
		}
		if req.ReturnText {
			ranks[i].Text = &texts[i]
		}
	}
	slices.SortStableFunc(ranks, func(a, b rank) int { return cmp.Compare(b.Score, a.Score) })
	writeJSON(w, http.StatusOK, ranks)
	return http.StatusOK, nil
}
