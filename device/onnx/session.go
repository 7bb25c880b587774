//go:build onnx

package onnx

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/drainpipe/drainpipe/device"
)

// session is one device session: one ONNX Runtime session for every
// allowed batch size, run on tensors over the batch's Arrow memory where it
// can (no copy in), writing into the output record's buffers (no copy out).
type session struct {
	m      *Model
	mem    memory.Allocator
	run    *ort.DynamicAdvancedSession
	shapes map[int]*shape
	outs   []output
	schema *arrow.Schema
	down   bool
}

// shape holds, for one batch size, the input tensors that columns are
// copied into when no tensor can be made over their memory (list columns,
// whose padding rows are empty).
type shape struct {
	rows int
	ins  []input
}

type input interface {
	value() ort.Value
	// view returns a tensor over the column's values, or nil if the
	// column's layout needs a copy.
	view(col arrow.Array, rows int) (ort.Value, error)
	fill(col arrow.Array, live int) error
}

func newSession(m *Model, cfg device.SessionConfig) (s *session, err error) {
	s = &session{m: m, mem: cfg.Allocator, shapes: map[int]*shape{}, schema: m.OutputSchema()}
	if s.mem == nil {
		s.mem = memory.DefaultAllocator
	}
	if err := m.check(cfg.Schema, cfg.BatchSize); err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer opts.Destroy()
	threads := m.threads
	if threads == 0 && (cfg.Sessions > 1 || cfg.Replicas > 1) {
		threads = 1 // sessions side by side: one core each
	}
	if threads > 0 {
		if err := opts.SetIntraOpNumThreads(threads); err != nil {
			return nil, fmt.Errorf("onnx: intra-op threads: %w", err)
		}
	}
	defer func() {
		if err != nil {
			s.destroy()
		}
	}()
	sizes := cfg.BatchSizes
	if len(sizes) == 0 {
		sizes = []int{cfg.BatchSize}
	}
	for _, rows := range sizes {
		sh, err := m.bind(rows)
		if err != nil {
			return nil, err
		}
		s.shapes[rows] = sh
	}
	for _, io := range m.outputs {
		out, err := newOutput(io)
		if err != nil {
			return nil, err
		}
		s.outs = append(s.outs, out)
	}
	if s.run, err = ort.NewDynamicAdvancedSession(m.path, m.Inputs(), m.Outputs(), opts); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, m.path, err)
	}
	return s, nil
}

// check compares the model's declared inputs with the batch schema.
func (m *Model) check(schema *arrow.Schema, batch int) error {
	for _, io := range append(append([]ort.InputOutputInfo{}, m.inputs...), m.outputs...) {
		if d := io.Dimensions[0]; d > 0 && int(d) != batch {
			return fmt.Errorf("%w: %q has a fixed batch dimension of %d, the session's batch size is %d", ErrMismatch, io.Name, d, batch)
		}
	}
	for _, io := range m.inputs {
		name := m.column(io.Name)
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return fmt.Errorf("%w: input %q: no column %q in the batch", ErrMismatch, io.Name, name)
		}
		want, _ := elemType(io.DataType)
		width, err := rowWidth(io.Dimensions)
		if err != nil {
			return fmt.Errorf("%w: input %q: %v", ErrMismatch, io.Name, err)
		}
		if err := fits(schema.Field(idx[0]).Type, want, width); err != nil {
			return fmt.Errorf("%w: input %q, column %q: %v", ErrMismatch, io.Name, name, err)
		}
	}
	return nil
}

// fits reports whether a column of type dt can feed rows of width values
// of element type want.
func fits(dt, want arrow.DataType, width int) error {
	got, w := dt, 1
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		got, w = t.Elem(), int(t.Len())
	case *arrow.ListType:
		got, w = t.Elem(), width // row lengths are checked per batch
	case *arrow.LargeListType:
		got, w = t.Elem(), width
	}
	if !arrow.TypeEqual(got, want) {
		return fmt.Errorf("element type %s, the model wants %s", got, want)
	}
	if w != width {
		return fmt.Errorf("%d values per row, the model wants %d", w, width)
	}
	return nil
}

// bind creates the input tensors for batches of rows rows.
func (m *Model) bind(rows int) (*shape, error) {
	sh := &shape{rows: rows}
	for _, io := range m.inputs {
		in, err := newInput(io, rows)
		if err != nil {
			sh.destroy()
			return nil, err
		}
		sh.ins = append(sh.ins, in)
	}
	return sh, nil
}

func (sh *shape) destroy() error {
	var errs []error
	for _, in := range sh.ins {
		errs = append(errs, in.value().Destroy())
	}
	return errors.Join(errs...)
}

func (s *session) destroy() error {
	var errs []error
	if s.run != nil {
		errs = append(errs, s.run.Destroy())
		s.run = nil
	}
	for _, sh := range s.shapes {
		errs = append(errs, sh.destroy())
	}
	s.shapes = nil
	return errors.Join(errs...)
}

func (s *session) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	rows := int(b.Record.NumRows())
	sh, ok := s.shapes[rows]
	if !ok {
		return nil, fmt.Errorf("onnx: batch of %d rows, the session was bound for %v", rows, keys(s.shapes))
	}
	schema := b.Record.Schema()
	ins := make([]ort.Value, len(sh.ins))
	for i, io := range s.m.inputs {
		name := s.m.column(io.Name)
		col := b.Record.Column(schema.FieldIndices(name)[0])
		view, err := sh.ins[i].view(col, rows)
		if err == nil && view == nil {
			err = sh.ins[i].fill(col, b.Rows())
			ins[i] = sh.ins[i].value()
		} else if view != nil {
			ins[i] = view
			defer view.Destroy()
		}
		if err != nil {
			return nil, fmt.Errorf("onnx: input %q, column %q: %w", io.Name, name, err)
		}
	}
	outs := make([]ort.Value, len(s.outs))
	bufs := make([]*memory.Buffer, len(s.outs))
	defer func() {
		for i := range outs {
			if outs[i] != nil {
				outs[i].Destroy()
			}
			if bufs[i] != nil {
				bufs[i].Release()
			}
		}
	}()
	for i, out := range s.outs {
		var err error
		if outs[i], bufs[i], err = out.alloc(s.mem, rows); err != nil {
			return nil, err
		}
	}
	if err := s.run.Run(ins, outs); err != nil {
		return nil, fmt.Errorf("onnx: run: %w", err)
	}
	cols := make([]arrow.Array, len(s.outs))
	for i, out := range s.outs {
		cols[i] = out.column(bufs[i], rows)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(s.schema, cols, int64(rows)), nil
}

// keys returns the batch sizes a session was bound for, ascending.
func keys(m map[int]*shape) []int {
	return slices.Sorted(maps.Keys(m))
}

func (s *session) Shutdown(context.Context) error {
	if s.down {
		return errors.New("onnx: shutdown twice")
	}
	s.down = true
	return errors.Join(s.destroy(), releaseEnv())
}

// ---- tensors ----
