package hfmodel

import (
	"fmt"
	"slices"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/seq"
)

// Options returns the seq options the folder asks for: its pad id,
// vocabulary, padding side, position ids, poolings, modules, and a
// planner for its length (buckets from 8 up to MaxLength).
func (f *Folder) Options() []seq.Option {
	opts := []seq.Option{
		seq.WithPlanner(seq.Planner{MaxLength: f.MaxLength, Buckets: seq.DefaultBuckets(f.MaxLength)}),
		seq.WithPadID(f.PadID), seq.WithVocab(f.Vocab), seq.WithPositionStart(f.PositionStart),
	}
	if f.LeftPadding {
		opts = append(opts, seq.WithLeftPadding())
	}
	if len(f.Poolings) > 0 {
		opts = append(opts, seq.WithPoolings(f.Poolings...))
	}
	if len(f.Modules) > 0 {
		opts = append(opts, seq.WithModules(f.Modules...))
	}
	return opts
}

// Model makes the folder's model over an engine that runs its ONNX file
// (onnx.OpenSequence(f.ONNX)): a seq.Model with the folder's options,
// then opts, and, when the engine has a "logits" output, the folder's
// head over it. It returns the model to run and the seq.Model inside,
// whose Stats and Shapes say what ran.
func (f *Folder) Model(e seq.Engine, opts ...seq.Option) (device.Model, *seq.Model, error) {
	sm, err := seq.New(e, append(f.Options(), opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", f.Dir, err)
	}
	if !slices.ContainsFunc(e.Outputs(), func(o seq.Output) bool { return o.Name == head.Logits && !o.PerToken }) {
		return sm, sm, nil
	}
	hm, err := head.Wrap(sm, f.Head)
	if err != nil {
		return nil, nil, fmt.Errorf("model %s: %w", f.Dir, err)
	}
	return hm, sm, nil
}
