package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/serve"
)

// textModel is how the server encodes the text of requests for a model
// whose folder ships a tokenizer: within the ceiling of bytes a text, at
// its length, with its labels and pooling; with chunks, a long text is
// embedded as its windows, pooled.
func textModel(m *loadedModel, ceiling int, chunks chunkFlags) (*serve.TextModel, error) {
	t := &serve.TextModel{Encode: serve.TokenizerEncode(m.tok, ceiling), Pooling: m.seq.Pooling(),
		MaxLength: m.seq.Planner().Length(1 << 30), Pair: m.textPair != ""}
	if tr := m.tok.Truncation(); tr != nil {
		t.MaxLength = tr.MaxLength
	}
	if h, ok := m.model.(*head.Model); ok {
		t.Labels = h.Head().Labels
	}
	if chunks.pool == "" || t.Pair {
		return t, nil
	}
	// A stride the windows leave no room for fails here, not on a request.
	for _, err := range m.tok.Windows("", t.MaxLength, chunks.overlap, 0) {
		if err != nil {
			return nil, fmt.Errorf("--chunk-overlap %d: %w", chunks.overlap, err)
		}
	}
	t.Windows = serve.TokenizerWindows(m.tok, t.MaxLength, chunks.overlap, ceiling, chunks.max)
	mods := m.folder.Modules
	t.Normalize = len(mods) > 0 && mods[len(mods)-1] == seq.Module(seq.Normalize{})
	return t, nil
}

// chunkFlags are serve's flags of long texts: --chunk-pool,
// --chunk-overlap and --max-chunks.
type chunkFlags struct {
	pool         string
	overlap, max int
}

// check refuses what the flags cannot mean.
func (c chunkFlags) check(fs *pflag.FlagSet) error {
	switch {
	case c.pool != "" && c.pool != "mean":
		return usageError(fmt.Errorf("serve: --chunk-pool %q: the one pooling is mean", c.pool))
	case c.pool == "" && (fs.Changed("chunk-overlap") || fs.Changed("max-chunks")):
		return usageError(errors.New("serve: --chunk-overlap and --max-chunks go with --chunk-pool"))
	case c.overlap < 0 || c.max < 1:
		return usageError(fmt.Errorf("serve: --chunk-overlap %d, --max-chunks %d: want 0 or more, and 1 or more", c.overlap, c.max))
	}
	return nil
}
