//go:build onnx

package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/serve"
)

// loadONNX opens an ONNX model: a sequence model (inputs input_ids and
// the like, [batch, sequence]) as sq says, or else a model with one
// input, whose feature column is column (or the input's name).
func loadONNX(path, column string, sq *sequenceFlags) (*loadedModel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	probe, err := onnx.Open(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if probe.IsSequence() {
		return loadSequence(path, hex.EncodeToString(sum[:]), sq)
	}
	inputs := probe.Inputs()
	if len(inputs) != 1 {
		return nil, fmt.Errorf("model %s: %d inputs %v; the CLI runs models with one input, or sequence models (inputs named input_ids, attention_mask, token_type_ids, position_ids)", path, len(inputs), inputs)
	}
	if column == "" {
		column = inputs[0]
	}
	m, err := onnx.Open(path, onnx.WithInput(inputs[0], column))
	if err != nil {
		return nil, err
	}
	width, err := m.InputWidth(inputs[0])
	if err != nil {
		return nil, err
	}
	// One-thread sessions side by side beat one session on every core
	// here too (BENCHMARKS.md), at the cost of a copy of the weights each.
	return &loadedModel{model: m, inputSize: width, feature: column, id: hex.EncodeToString(sum[:]),
		sessions: runtime.GOMAXPROCS(0)}, nil
}

// loadSequence opens an ONNX sequence model with the configuration of
// the model folder it sits in, if any.
func loadSequence(path, digest string, sq *sequenceFlags) (*loadedModel, error) {
	folder, err := hfmodel.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	eng, err := onnx.OpenSequence(path)
	if err != nil {
		return nil, err
	}
	perToken := slices.ContainsFunc(eng.Outputs(), func(o seq.Output) bool { return o.PerToken })
	opts, desc, err := sq.options(folder, perToken)
	if err != nil {
		return nil, err
	}
	tok, tokDigest, err := sq.loadTokenizer(folder)
	if err != nil {
		return nil, err
	}
	desc += fmt.Sprintf(" text=%q tokenizer=%s", sq.text, tokDigest)
	textPair := sq.textPair
	if sq.servesText && folder.Tokenizer != nil {
		tok = folder.Tokenizer
		if len(folder.Head.Labels) == 1 {
			// A cross-encoder reads a query and a passage as a pair,
			// told apart by their type ids.
			textPair = serve.TextPairInput
			opts = append(opts, seq.WithTypeIDs(pairTypeIDs))
		}
	}
	m, sm, err := folder.Model(eng, opts...)
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256([]byte(digest + "\n" + desc))
	return &loadedModel{model: m, seq: sm, folder: folder, seqInputs: eng.Inputs(), fileSHA: digest, feature: cmp.Or(sq.tokens, seq.InputIDs), typeIDs: sq.typeIDs, window: sq.window, tok: tok, text: sq.text, textPair: textPair, maxTextBytes: int64(sq.maxTextBytes),
		id: hex.EncodeToString(id[:]), sessions: runtime.GOMAXPROCS(0)}, nil
}
