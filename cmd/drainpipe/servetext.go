package main

import (
	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/serve"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// textModel is how the server encodes the text of requests for a model
// whose folder ships a tokenizer: within the ceiling of bytes a text, at
// its length, with its labels and pooling.
func textModel(m *loadedModel, ceiling int) *serve.TextModel {
	t := &serve.TextModel{Pooling: m.seq.Pooling(), MaxLength: m.seq.Planner().Length(1 << 30), Pair: m.textPair != ""}
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
		out := serve.TextEncoding{IDs: e.IDs, Tokens: e.Tokens, Offsets: e.Offsets, Truncated: e.Truncated, Special: make([]bool, len(e.IDs))}
		if isPair {
			out.TypeIDs = e.TypeIDs
		}
		for i, s := range e.SpecialTokensMask {
			out.Special[i] = s == 1
		}
		return out, nil
	}
	return t
}
