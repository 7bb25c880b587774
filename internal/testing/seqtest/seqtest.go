// Package seqtest holds a small sequence model in pure Go for tests: an
// engine whose outputs depend on a row's attended tokens alone, as a
// transformer's do, so padding, bucketing and order can be checked
// exactly against each row run alone.
package seqtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/drainpipe/drainpipe/seq"
)

// Engine is a seq.Engine with three outputs: "last_hidden_state" (per
// token, Width values), "sentence_embedding" (Width) and "logits" (3).
// Each token's vector mixes its id's embedding with the mean of the
// row's attended tokens (attention in miniature) and its position.
type Engine struct {
	Width int
	// Vocab bounds the ids (an id at or past it fails the sub-batch, as
	// an embedding lookup does).
	Vocab int64
	// Runs counts sub-batches run; Peak is the largest Rows × Tokens.
	Runs, Peak atomic.Int64
	// Started and Down count sessions.
	Started, Down atomic.Int64
	// Shapes, if set, are checked against each session's declared shapes.
	Shapes func([]seq.Shape)
	// Warm makes the engine a seq.WarmUpper.
	Warm bool
}

var (
	_ seq.Engine    = (*Engine)(nil)
	_ seq.WarmUpper = (*Engine)(nil)
)

// WarmUp implements seq.WarmUpper: Warm.
func (e *Engine) WarmUp() bool { return e.Warm }

// ErrVocab reports an id past the vocabulary.
var ErrVocab = errors.New("seqtest: token id out of the vocabulary")

func (e *Engine) Outputs() []seq.Output {
	return []seq.Output{
		{Name: "last_hidden_state", Width: e.Width, PerToken: true},
		{Name: "sentence_embedding", Width: e.Width},
		{Name: "logits", Width: 3},
	}
}

func (e *Engine) Start(_ context.Context, cfg seq.EngineConfig) (seq.EngineSession, error) {
	if e.Shapes != nil {
		e.Shapes(cfg.Shapes)
	}
	e.Started.Add(1)
	return &session{e: e}, nil
}

type session struct {
	e    *Engine
	down bool
}

func (s *session) Shutdown(context.Context) error {
	if s.down {
		return errors.New("seqtest: shutdown twice")
	}
	s.down = true
	s.e.Down.Add(1)
	return nil
}

func (s *session) Run(ctx context.Context, b *seq.Batch) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := s.e
	e.Runs.Add(1)
	for {
		p := e.Peak.Load()
		if int64(b.Shape.Slots()) <= p || e.Peak.CompareAndSwap(p, int64(b.Shape.Slots())) {
			break
		}
	}
	R, S, W := b.Shape.Rows, b.Shape.Tokens, e.Width
	hidden := make([]float32, R*S*W)
	sentence := make([]float32, R*W)
	logits := make([]float32, R*3)
	for r := range R {
		if err := Row(e.Width, e.Vocab, b.IDs[r*S:(r+1)*S], b.Mask[r*S:(r+1)*S], b.Positions[r*S:(r+1)*S],
			hidden[r*S*W:(r+1)*S*W], sentence[r*W:(r+1)*W], logits[r*3:(r+1)*3]); err != nil {
			return nil, fmt.Errorf("row %d of the sub-batch: %w", r, err)
		}
	}
	return [][]float32{hidden, sentence, logits}, nil
}

func embed(id int64, j int) float64 { return math.Sin(float64(id)*0.37 + float64(j)*1.3) }

// Row computes one row's outputs: hidden (len(ids) × width), sentence
// (width) and logits (3), over the tokens its mask attends.
func Row(width int, vocab int64, ids, mask, pos []int64, hidden, sentence, logits []float32) error {
	ctx := make([]float64, width)
	n := 0
	for t, id := range ids {
		if mask[t] == 0 {
			continue
		}
		if id < 0 || (vocab > 0 && id >= vocab) {
			return fmt.Errorf("%w: %d", ErrVocab, id)
		}
		n++
		for j := range width {
			ctx[j] += embed(id, j)
		}
	}
	if n == 0 {
		return errors.New("seqtest: a row with no attended token")
	}
	sum := make([]float64, width)
	for t, id := range ids {
		for j := range width {
			v := embed(id, j) + ctx[j]/float64(n) + 0.01*float64(pos[t])*float64(j+1)
			hidden[t*width+j] = float32(v)
			if mask[t] != 0 {
				sum[j] += float64(float32(v))
			}
		}
	}
	for j := range width {
		sentence[j] = float32(sum[j] / float64(n))
	}
	for k := range logits {
		logits[k] = sentence[k%width]
	}
	return nil
}

// Reference returns a row's outputs run alone, unpadded: its pooled mean
// of last_hidden_state, sentence_embedding and logits.
func Reference(width int, ids []int64) (pooled, sentence, logits []float32) {
	n := max(len(ids), 1)
	if len(ids) == 0 {
		ids = []int64{0} // an empty row runs as one padding token
	}
	mask, pos := make([]int64, n), make([]int64, n)
	for i := range n {
		mask[i], pos[i] = 1, int64(i)
	}
	hidden := make([]float32, n*width)
	sentence, logits = make([]float32, width), make([]float32, 3)
	if err := Row(width, 0, ids, mask, pos, hidden, sentence, logits); err != nil {
		panic(err)
	}
	pooled = make([]float32, width)
	for j := range width {
		var s float64
		for t := range n {
			s += float64(hidden[t*width+j])
		}
		pooled[j] = float32(s / float64(n))
	}
	return pooled, sentence, logits
}
