package serve

import (
	"context"
	"fmt"
	"math"
)

// embedTexts embeds texts on m, a model that reads text, one embedding
// a text, each text encoded once. Where the model pools windows
// (TextModel.Windows) and cut is false, a text longer than the model
// keeps is embedded as its windows, pooled into one; else such a text
// is cut, or refused with refuseLong. It returns the embeddings and the
// tokens the model ran.
func (s *Server) embedTexts(ctx context.Context, m *model, texts []string, cut, refuseLong bool) ([][]float32, int, error) {
	pool := m.text != nil && m.text.Windows != nil && !cut
	encs, err := m.encode(texts, nil, refuseLong && !pool)
	if err != nil {
		return nil, 0, err
	}
	owner := make([]int, len(encs)) // the text each row embeds
	for i := range owner {
		owner[i] = i
	}
	if pool {
		if encs, owner, err = m.windows(texts, encs); err != nil {
			return nil, 0, err
		}
	}
	resp, err := s.infer(ctx, &inferRequest{model: m.name, version: m.version, outputs: []string{embeddingOutput}, inputs: m.tokenInputs(encs)})
	if err != nil {
		return nil, 0, err
	}
	rows, err := floats(resp, embeddingOutput)
	if err != nil {
		return nil, 0, err
	}
	if pool && len(rows) > len(texts) {
		rows = poolWindows(rows, encs, owner, len(texts), m.text.Normalize)
	}
	return rows, usage(encs), nil
}

// windows replaces the encodings the tokenizer cut by the windows of
// their texts, in order, and says which text each row is of. The rows
// of a request are bounded as its texts are: by the model's queue.
func (m *model) windows(texts []string, encs []TextEncoding) ([]TextEncoding, []int, error) {
	var rows []TextEncoding
	var owner []int
	for i, e := range encs {
		ws := []TextEncoding{e}
		if e.Truncated {
			var err error
			if ws, err = m.text.Windows(texts[i]); err != nil {
				return nil, nil, invalid(fmt.Errorf("input %d: %w", i, err))
			}
		}
		for _, w := range ws {
			rows, owner = append(rows, w), append(owner, i)
		}
		if len(rows) > m.maxRows {
			return nil, nil, &Error{Code: CodeTooLarge, Err: fmt.Errorf("the inputs make more than %d windows; model %s takes at most %d rows a request (its queue bound, --queue-rows)", m.maxRows, m.name, m.maxRows)}
		}
	}
	return rows, owner, nil
}

// poolWindows pools each text's rows into one embedding: their mean,
// each row weighted by its tokens, as vLLM's chunked processing weights
// its chunks; then made unit length if the model's embeddings are.
func poolWindows(rows [][]float32, encs []TextEncoding, owner []int, texts int, normalize bool) [][]float32 {
	width := len(rows[0])
	sums, weights := make([][]float64, texts), make([]float64, texts)
	for r, v := range rows {
		t := owner[r]
		if sums[t] == nil {
			sums[t] = make([]float64, width)
		}
		w := float64(len(encs[r].IDs))
		for j, x := range v {
			sums[t][j] += w * float64(x)
		}
		weights[t] += w
	}
	out := make([][]float32, texts)
	for t, sum := range sums {
		norm := weights[t]
		if normalize {
			sq := 0.0
			for _, x := range sum {
				sq += x * x
			}
			norm = math.Sqrt(sq)
		}
		out[t] = make([]float32, width)
		for j, x := range sum {
			if norm > 0 {
				out[t][j] = float32(x / norm)
			}
		}
	}
	return out
}
