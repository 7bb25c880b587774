package main

import (
	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/serve"
)

// textModel is how the server encodes the text of requests for a model
// whose folder ships a tokenizer: within the ceiling of bytes a text, at
// its length, with its labels and pooling.
func textModel(m *loadedModel, ceiling int) *serve.TextModel {
	t := &serve.TextModel{Encode: serve.TokenizerEncode(m.tok, ceiling), Pooling: m.seq.Pooling(),
		MaxLength: m.seq.Planner().Length(1 << 30), Pair: m.textPair != ""}
	if tr := m.tok.Truncation(); tr != nil {
		t.MaxLength = tr.MaxLength
	}
	if h, ok := m.model.(*head.Model); ok {
		t.Labels = h.Head().Labels
	}
	return t
}
