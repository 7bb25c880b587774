package main

import (
	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/serve"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// textModel is what the server's text endpoints (TEI's) need of a model
// served with --tokenize: its tokenizer, within the ceiling of bytes a
// text, its length, labels and pooling.
func textModel(m *loadedModel, ceiling int) *serve.TextModel {
	t := &serve.TextModel{Pooling: m.seq.Pooling(), MaxLength: m.seq.Planner().Length(1 << 30)}
	if tr := m.tok.Truncation(); tr != nil {
		t.MaxLength = tr.MaxLength
	}
	if h, ok := m.model.(*head.Model); ok {
		t.Labels = h.Head().Labels
	}
	tok := m.tok
	t.Encode = func(text, pair string, isPair bool) (serve.TextEncoding, error) {
		var e tokenizer.Encoding
		var err error
		if isPair {
			e, err = tok.EncodePairWithin(text, pair, ceiling)
		} else {
			e, err = tok.EncodeWithin(text, ceiling)
		}
		if err != nil {
			return serve.TextEncoding{}, err
		}
		out := serve.TextEncoding{IDs: e.IDs, Tokens: e.Tokens, Truncated: e.Truncated, Special: make([]bool, len(e.IDs)), Offsets: make([][2]int, len(e.IDs))}
		first := byteOffsets(text)
		second := first
		if isPair {
			second = byteOffsets(pair)
		}
		for i := range e.IDs {
			out.Special[i] = e.SpecialTokensMask[i] == 1
			at := first
			if e.TypeIDs[i] == 1 && isPair {
				at = second
			}
			out.Offsets[i] = [2]int{at(e.Offsets[i][0]), at(e.Offsets[i][1])}
		}
		return out, nil
	}
	return t
}

// byteOffsets maps a text's character (code point) offsets, as the
// tokenizer gives them, to byte offsets.
func byteOffsets(text string) func(int) int {
	starts := make([]int, 0, len(text)+1)
	for i := range text {
		starts = append(starts, i)
	}
	starts = append(starts, len(text))
	return func(c int) int {
		if c < 0 || c >= len(starts) {
			return len(text)
		}
		return starts[c]
	}
}
