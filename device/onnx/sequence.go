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

var (
	_ seq.Engine    = (*Sequence)(nil)
	_ seq.WarmUpper = (*Sequence)(nil)
)

// WarmUp implements seq.WarmUpper: a session of a model made
// seq.WithWarmUp runs its largest declared shape first, so that the
// environment's arena grows to that peak once and every smaller shape
// reuses it.
func (s *Sequence) WarmUp() bool { return true }

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

// Start implements seq.Engine: one ONNX Runtime session, and one arena
// of outputs (and int32 inputs) sized by the largest declared shape,
// whose prefix each run's tensors take: what a session holds is bounded
// by the largest shape, not by how many shapes have run.
func (s *Sequence) Start(_ context.Context, cfg seq.EngineConfig) (_ seq.EngineSession, err error) {
	lib, err := (&Model{library: s.library}).libraryPath()
	if err != nil {
		return nil, err
	}
	if err := acquireEnv(lib); err != nil {
		return nil, err
	}
	ss := &seqSession{s: s, outs: make([][]float32, len(s.outs)), int32s: map[string][]int32{}}
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
	// Sub-batches come in many shapes. ONNX Runtime's memory patterns
	// are planned and kept per input shape: off. Its allocator is the
	// environment's arena (see acquireEnv), which grows by what a run
	// asks for and reuses it for the next shape, so it holds the largest
	// run's peak, not each shape's; without an arena every run's memory
	// would go back to the kernel and be faulted in again (two thirds of
	// a job's CPU was the kernel's).
	if err := opts.SetMemPattern(false); err != nil {
		return nil, fmt.Errorf("onnx: memory pattern: %w", err)
	}
	if err := opts.AddSessionConfigEntry("session.use_env_allocators", "1"); err != nil {
		return nil, fmt.Errorf("onnx: the environment's allocator: %w", err)
	}
	if ss.run, err = ort.NewDynamicAdvancedSession(s.path, names(s.inputs), names(s.outputs), opts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, s.path, err)
	}
	if ss.stop, err = ort.NewRunOptions(); err != nil {
		return nil, fmt.Errorf("onnx: run options: %w", err)
	}
	for _, sh := range cfg.Shapes {
		ss.grow(sh)
	}
	return ss, nil
}

type seqSession struct {
	s      *Sequence
	run    *ort.DynamicAdvancedSession
	stop   *ort.RunOptions    // terminates a run whose context ends
	outs   [][]float32        // an arena an output, for the largest shape
	int32s map[string][]int32 // int32 copies of inputs a graph takes so
	down   bool
}

// grow makes the arenas hold a shape's tensors.
func (ss *seqSession) grow(sh seq.Shape) {
	R, S := sh.Rows, sh.Tokens
	for i, o := range ss.s.outs {
		n := R * o.Width
		if o.PerToken {
			n *= S
		}
		if len(ss.outs[i]) < n {
			ss.outs[i] = make([]float32, n)
		}
	}
	for _, io := range ss.s.inputs {
		if io.DataType == ort.TensorElementDataTypeInt32 && len(ss.int32s[io.Name]) < R*S {
			ss.int32s[io.Name] = make([]int32, R*S)
		}
	}
}

func (ss *seqSession) Run(ctx context.Context, b *seq.Batch) (_ [][]float32, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ss.grow(b.Shape) // a shape past the declared ones (no buckets)
	var tensors []ort.Value
	defer func() {
		for _, t := range tensors {
			err = errors.Join(err, t.Destroy())
		}
	}()
	R, S := int64(b.Shape.Rows), int64(b.Shape.Tokens)
	dims := ort.NewShape(R, S)
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
		var t ort.Value
		var err error
		if buf, ok := ss.int32s[io.Name]; ok {
			buf = buf[:len(vals)]
			for j, v := range vals {
				buf[j] = int32(v)
			}
			t, err = ort.NewTensor(dims, buf)
		} else {
			t, err = ort.NewTensor(dims, vals)
		}
		if err != nil {
			return nil, fmt.Errorf("onnx: input %q: %w", io.Name, err)
		}
		tensors = append(tensors, t)
		ins[i] = t
	}
	outs := make([]ort.Value, len(ss.s.outs))
	res := make([][]float32, len(ss.s.outs))
	for i, o := range ss.s.outs {
		shape := ort.NewShape(R, int64(o.Width))
		if o.PerToken {
			shape = ort.NewShape(R, S, int64(o.Width))
		}
		res[i] = ss.outs[i][:shape.FlattenedSize()]
		t, err := ort.NewTensor(shape, res[i])
		if err != nil {
			return nil, fmt.Errorf("onnx: output %q tensor %v: %w", o.Name, shape, err)
		}
		tensors = append(tensors, t)
		outs[i] = t
	}
	// A context that ends mid-run terminates it: a cancelled request
	// does not hold the session for the rest of a sub-batch.
	terminated := make(chan struct{})
	unwatch := context.AfterFunc(ctx, func() {
		ss.stop.Terminate()
		close(terminated)
	})
	runErr := ss.run.RunWithOptions(ins, outs, ss.stop)
	if !unwatch() {
		<-terminated // then the flag is set, and unset for the next run
		if err := ss.stop.UnsetTerminate(); err != nil {
			return nil, errors.Join(ctx.Err(), err)
		}
		return nil, errors.Join(ctx.Err(), runErr)
	}
	if runErr != nil {
		return nil, fmt.Errorf("onnx: run %s: %w", b.Shape, runErr)
	}
	return res, nil
}

func (ss *seqSession) destroy() error {
	var err error
	if ss.run != nil {
		err = ss.run.Destroy()
		ss.run = nil
	}
	if ss.stop != nil {
		err = errors.Join(err, ss.stop.Destroy())
		ss.stop = nil
	}
	ss.outs, ss.int32s = nil, nil
	return err
}

func (ss *seqSession) Shutdown(context.Context) error {
	if ss.down {
		return errors.New("onnx: shutdown twice")
	}
	ss.down = true
	return errors.Join(ss.destroy(), releaseEnv())
}
