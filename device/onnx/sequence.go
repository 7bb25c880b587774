//go:build onnx

package onnx

import (
	"context"
	"errors"
	"fmt"
	"slices"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/drainpipe/drainpipe/seq"
)

// Sequence is an ONNX sequence model (a transformer encoder) opened as a
// seq.Engine: inputs [batch, sequence] bound by name (input_ids,
// attention_mask, token_type_ids, position_ids: those the graph
// declares), outputs [batch, K] per row or [batch, sequence, H] per
// token. Wrap it in seq.New to run it over windows of token rows.
type Sequence struct {
	path    string
	library string
	threads int
	inputs  []ort.InputOutputInfo
	outputs []ort.InputOutputInfo
	outs    []seq.Output
}

var _ seq.Engine = (*Sequence)(nil)

// sequenceInputs are the input names a sequence graph may declare.
var sequenceInputs = []string{seq.InputIDs, seq.AttentionMask, seq.TokenTypeIDs, seq.PositionIDs}

// OpenSequence reads an ONNX sequence model's declared inputs and
// outputs and checks that they are a sequence model's. WithLibrary and
// WithIntraOpThreads apply.
func OpenSequence(path string, opts ...Option) (*Sequence, error) {
	m, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	s := &Sequence{path: path, library: m.library, threads: m.threads, inputs: m.inputs, outputs: m.outputs}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMismatch, path, err)
	}
	return s, nil
}

// IsSequence reports whether a model's inputs are a sequence model's:
// every input [batch, sequence] of integers, named as a sequence input.
func (m *Model) IsSequence() bool {
	return (&Sequence{inputs: m.inputs, outputs: m.outputs}).check() == nil
}

func (s *Sequence) check() error {
	if !slices.ContainsFunc(s.inputs, func(io ort.InputOutputInfo) bool { return io.Name == seq.InputIDs }) {
		return fmt.Errorf("no input %q among %v: not a sequence model", seq.InputIDs, names(s.inputs))
	}
	for _, io := range s.inputs {
		if !slices.Contains(sequenceInputs, io.Name) {
			return fmt.Errorf("input %q: a sequence model's inputs are %v", io.Name, sequenceInputs)
		}
		if len(io.Dimensions) != 2 {
			return fmt.Errorf("input %q has shape %v, want [batch, sequence]", io.Name, io.Dimensions)
		}
		if io.DataType != ort.TensorElementDataTypeInt64 && io.DataType != ort.TensorElementDataTypeInt32 {
			return fmt.Errorf("input %q holds %v, want int64 or int32", io.Name, io.DataType)
		}
	}
	s.outs = nil
	for _, io := range s.outputs {
		if io.DataType != ort.TensorElementDataTypeFloat {
			return fmt.Errorf("output %q holds %v; sequence outputs are float", io.Name, io.DataType)
		}
		d := io.Dimensions
		switch {
		case len(d) == 2 && d[1] > 0:
			s.outs = append(s.outs, seq.Output{Name: io.Name, Width: int(d[1])})
		case len(d) == 3 && d[2] > 0:
			s.outs = append(s.outs, seq.Output{Name: io.Name, Width: int(d[2]), PerToken: true})
		default:
			return fmt.Errorf("output %q has shape %v: want [batch, K] or [batch, sequence, H] (an inner dynamic axis other than the sequence is not supported)", io.Name, d)
		}
	}
	return nil
}

// Inputs returns the inputs the graph declares.
func (s *Sequence) Inputs() []string { return names(s.inputs) }

// Outputs implements seq.Engine.
func (s *Sequence) Outputs() []seq.Output { return slices.Clone(s.outs) }

// Start implements seq.Engine: one ONNX Runtime session. A shape's
// tensors are allocated when it first runs and kept: the declared set
// can be hundreds of shapes, most of which a job's windows never run.
func (s *Sequence) Start(_ context.Context, cfg seq.EngineConfig) (_ seq.EngineSession, err error) {
	lib, err := (&Model{library: s.library}).libraryPath()
	if err != nil {
		return nil, err
	}
	if err := acquireEnv(lib); err != nil {
		return nil, err
	}
	ss := &seqSession{s: s, bound: map[seq.Shape]*seqShape{}, declared: map[seq.Shape]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, ss.destroy(), releaseEnv())
		}
	}()
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer opts.Destroy()
	threads := s.threads
	if threads == 0 && (cfg.Sessions > 1 || cfg.Replicas > 1) {
		threads = 1
	}
	if threads > 0 {
		if err := opts.SetIntraOpNumThreads(threads); err != nil {
			return nil, fmt.Errorf("onnx: intra-op threads: %w", err)
		}
	}
	// Sub-batches come in many shapes: ONNX Runtime's memory patterns
	// (planned and kept per input shape) and its CPU arena (kept at the
	// largest shape's size) would make each session hold the peak of
	// every shape it ran; without them a run's memory is freed after it.
	if err := opts.SetMemPattern(false); err != nil {
		return nil, fmt.Errorf("onnx: memory pattern: %w", err)
	}
	if err := opts.SetCpuMemArena(false); err != nil {
		return nil, fmt.Errorf("onnx: memory arena: %w", err)
	}
	if ss.run, err = ort.NewDynamicAdvancedSession(s.path, names(s.inputs), names(s.outputs), opts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, s.path, err)
	}
	for _, sh := range cfg.Shapes {
		ss.declared[sh] = true
	}
	return ss, nil
}

// seqShape holds the tensors of one shape: the outputs ONNX Runtime
// writes, and the int32 copies of inputs a graph takes as int32.
type seqShape struct {
	outs  []*ort.Tensor[float32]
	int32 map[string]*ort.Tensor[int32]
}

func (s *Sequence) bind(sh seq.Shape) (_ *seqShape, err error) {
	b := &seqShape{int32: map[string]*ort.Tensor[int32]{}}
	defer func() {
		if err != nil {
			b.destroy()
		}
	}()
	R, S := int64(sh.Rows), int64(sh.Tokens)
	for _, o := range s.outs {
		dims := ort.NewShape(R, int64(o.Width))
		if o.PerToken {
			dims = ort.NewShape(R, S, int64(o.Width))
		}
		t, err := ort.NewEmptyTensor[float32](dims)
		if err != nil {
			return nil, fmt.Errorf("onnx: output %q tensor %v: %w", o.Name, dims, err)
		}
		b.outs = append(b.outs, t)
	}
	for _, io := range s.inputs {
		if io.DataType == ort.TensorElementDataTypeInt32 {
			t, err := ort.NewEmptyTensor[int32](ort.NewShape(R, S))
			if err != nil {
				return nil, fmt.Errorf("onnx: input %q tensor: %w", io.Name, err)
			}
			b.int32[io.Name] = t
		}
	}
	return b, nil
}

func (b *seqShape) destroy() error {
	var errs []error
	for _, t := range b.outs {
		errs = append(errs, t.Destroy())
	}
	for _, t := range b.int32 {
		errs = append(errs, t.Destroy())
	}
	return errors.Join(errs...)
}

type seqSession struct {
	s        *Sequence
	run      *ort.DynamicAdvancedSession
	bound    map[seq.Shape]*seqShape // the declared shapes run so far
	declared map[seq.Shape]bool
	last     *seqShape // an undeclared shape's, until the next run
	down     bool
}

func (ss *seqSession) Run(ctx context.Context, b *seq.Batch) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sh, ok := ss.bound[b.Shape]
	switch {
	case ok:
	case ss.declared[b.Shape]:
		var err error
		if sh, err = ss.s.bind(b.Shape); err != nil {
			return nil, err
		}
		ss.bound[b.Shape] = sh
	default:
		// Sub-batches without declared shapes (no buckets): bound for
		// this run alone, as many shapes may come.
		if ss.last != nil {
			ss.last.destroy()
			ss.last = nil
		}
		var err error
		if sh, err = ss.s.bind(b.Shape); err != nil {
			return nil, err
		}
		ss.last = sh
	}
	dims := ort.NewShape(int64(b.Shape.Rows), int64(b.Shape.Tokens))
	ins := make([]ort.Value, len(ss.s.inputs))
	for i, io := range ss.s.inputs {
		var vals []int64
		switch io.Name {
		case seq.InputIDs:
			vals = b.IDs
		case seq.AttentionMask:
			vals = b.Mask
		case seq.TokenTypeIDs:
			vals = b.TypeIDs
		default:
			vals = b.Positions
		}
		if t, ok := sh.int32[io.Name]; ok {
			dst := t.GetData()
			for j, v := range vals {
				dst[j] = int32(v)
			}
			ins[i] = t
			continue
		}
		t, err := ort.NewTensor(dims, vals)
		if err != nil {
			return nil, fmt.Errorf("onnx: input %q: %w", io.Name, err)
		}
		defer t.Destroy()
		ins[i] = t
	}
	outs := make([]ort.Value, len(sh.outs))
	res := make([][]float32, len(sh.outs))
	for i, t := range sh.outs {
		outs[i], res[i] = t, t.GetData()
	}
	if err := ss.run.Run(ins, outs); err != nil {
		return nil, fmt.Errorf("onnx: run %s: %w", b.Shape, err)
	}
	return res, nil
}

func (ss *seqSession) destroy() error {
	var errs []error
	if ss.run != nil {
		errs = append(errs, ss.run.Destroy())
		ss.run = nil
	}
	for _, b := range ss.bound {
		errs = append(errs, b.destroy())
	}
	ss.bound = nil
	if ss.last != nil {
		errs = append(errs, ss.last.destroy())
		ss.last = nil
	}
	return errors.Join(errs...)
}

func (ss *seqSession) Shutdown(context.Context) error {
	if ss.down {
		return errors.New("onnx: shutdown twice")
	}
	ss.down = true
	return errors.Join(ss.destroy(), releaseEnv())
}
