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
	"github.com/drainpipe/drainpipe/tensor"
)

// element is a tensor element type the device supports.
type element interface {
	float32 | float64 | int64 | int32
}

// elemType maps an ONNX element type to Arrow's.
func elemType(t ort.TensorElementDataType) (arrow.DataType, error) {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return arrow.PrimitiveTypes.Float32, nil
	case ort.TensorElementDataTypeDouble:
		return arrow.PrimitiveTypes.Float64, nil
	case ort.TensorElementDataTypeInt64:
		return arrow.PrimitiveTypes.Int64, nil
	case ort.TensorElementDataTypeInt32:
		return arrow.PrimitiveTypes.Int32, nil
	}
	return nil, fmt.Errorf("element type %v is not supported (float, double, int64, int32 are)", t)
}

// rowWidth returns the values per row of a [batch, …] shape.
func rowWidth(dims ort.Shape) (int, error) {
	w := 1
	for _, d := range dims[1:] {
		if d <= 0 {
			return 0, fmt.Errorf("shape %v: only the batch dimension may be dynamic", dims)
		}
		w *= int(d)
	}
	return w, nil
}

// columnType is the Arrow type of a tensor of shape dims: a scalar for
// [batch], a fixed_size_list of the row's values otherwise.
func columnType(elem arrow.DataType, dims ort.Shape, width int) arrow.DataType {
	if len(dims) == 1 {
		return elem
	}
	return arrow.FixedSizeListOfNonNullable(int32(width), elem)
}

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

type tensorIn[T element] struct {
	t     *ort.Tensor[T]
	width int
}

func newInput(io ort.InputOutputInfo, rows int) (input, error) {
	width, err := rowWidth(io.Dimensions)
	if err != nil {
		return nil, err
	}
	shape := append(ort.Shape{int64(rows)}, io.Dimensions[1:]...)
	switch io.DataType {
	case ort.TensorElementDataTypeFloat:
		return newTensorIn[float32](shape, width)
	case ort.TensorElementDataTypeDouble:
		return newTensorIn[float64](shape, width)
	case ort.TensorElementDataTypeInt64:
		return newTensorIn[int64](shape, width)
	default:
		return newTensorIn[int32](shape, width)
	}
}

func newTensorIn[T element](shape ort.Shape, width int) (input, error) {
	t, err := ort.NewEmptyTensor[T](shape)
	if err != nil {
		return nil, fmt.Errorf("onnx: input tensor %v: %w", shape, err)
	}
	return &tensorIn[T]{t: t, width: width}, nil
}

func (in *tensorIn[T]) value() ort.Value { return in.t }

// view makes a tensor over a fixed_size_list or primitive column's values:
// ONNX Runtime reads the batch where Arrow holds it.
func (in *tensorIn[T]) view(col arrow.Array, rows int) (ort.Value, error) {
	w := in.width
	var vals []T
	var err error
	switch c := col.(type) {
	case *array.FixedSizeList:
		if c.NullN() > 0 {
			return nil, fmt.Errorf("%w: a row is null", tensor.ErrNull)
		}
		if vals, err = typed[T](c.ListValues()); err != nil {
			return nil, err
		}
		vals = vals[c.Offset()*w : (c.Offset()+rows)*w]
	case array.ListLike:
		return nil, nil
	default:
		if vals, err = typed[T](col); err != nil {
			return nil, err
		}
	}
	t, err := ort.NewTensor(in.t.GetShape(), vals)
	if err != nil {
		return nil, fmt.Errorf("onnx: input tensor: %w", err)
	}
	return t, nil
}

// fill copies the column into the tensor. Padding rows of a list column
// are empty lists: they become zeros.
func (in *tensorIn[T]) fill(col arrow.Array, live int) error {
	dst := in.t.GetData()
	w := in.width
	switch c := col.(type) {
	case *array.FixedSizeList:
		if c.NullN() > 0 {
			return fmt.Errorf("%w: a row is null", tensor.ErrNull)
		}
		vals, err := typed[T](c.ListValues())
		if err != nil {
			return err
		}
		copy(dst, vals[c.Offset()*w:(c.Offset()+c.Len())*w])
	case array.ListLike:
		real := array.NewSlice(col, 0, int64(live))
		defer real.Release()
		if x, ok := any(dst).([]float32); ok {
			v, err := tensor.Float32(real, w)
			if err != nil {
				return err
			}
			copy(x, v)
			clear(x[len(v):])
			return nil
		}
		return fmt.Errorf("list columns feed float32 inputs only; use a fixed_size_list")
	default:
		if col.NullN() > 0 {
			return fmt.Errorf("%w: a row is null", tensor.ErrNull)
		}
		vals, err := typed[T](col)
		if err != nil {
			return err
		}
		copy(dst, vals)
	}
	return nil
}

// typed returns the values of a primitive array of element type T.
func typed[T element](arr arrow.Array) ([]T, error) {
	if arr.NullN() > 0 {
		return nil, fmt.Errorf("%w: a value is null", tensor.ErrNull)
	}
	var out any
	switch a := arr.(type) {
	case *array.Float32:
		out = a.Float32Values()
	case *array.Float64:
		out = a.Float64Values()
	case *array.Int64:
		out = a.Int64Values()
	case *array.Int32:
		out = a.Int32Values()
	}
	v, ok := out.([]T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("values of type %s, want %T", arr.DataType(), zero)
	}
	return v, nil
}

// output is one model output: the Arrow column it becomes.
type output struct {
	dt    ort.TensorElementDataType
	dims  ort.Shape // past the batch dimension
	typ   arrow.DataType
	elem  arrow.DataType
	width int
}

func newOutput(io ort.InputOutputInfo) (output, error) {
	width, err := rowWidth(io.Dimensions)
	if err != nil {
		return output{}, err
	}
	elem, err := elemType(io.DataType)
	if err != nil {
		return output{}, err
	}
	return output{dt: io.DataType, dims: io.Dimensions[1:], typ: columnType(elem, io.Dimensions, width), elem: elem, width: width}, nil
}

// alloc makes the Arrow buffer of rows rows of the output and a tensor
// over it for ONNX Runtime to write into.
func (o output) alloc(mem memory.Allocator, rows int) (ort.Value, *memory.Buffer, error) {
	n := rows * o.width
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * o.elem.(arrow.FixedWidthDataType).Bytes())
	shape := append(ort.Shape{int64(rows)}, o.dims...)
	var t ort.Value
	var err error
	switch o.dt {
	case ort.TensorElementDataTypeFloat:
		t, err = ort.NewTensor(shape, arrow.Float32Traits.CastFromBytes(buf.Bytes())[:n])
	case ort.TensorElementDataTypeDouble:
		t, err = ort.NewTensor(shape, arrow.Float64Traits.CastFromBytes(buf.Bytes())[:n])
	case ort.TensorElementDataTypeInt64:
		t, err = ort.NewTensor(shape, arrow.Int64Traits.CastFromBytes(buf.Bytes())[:n])
	default:
		t, err = ort.NewTensor(shape, arrow.Int32Traits.CastFromBytes(buf.Bytes())[:n])
	}
	if err != nil {
		buf.Release()
		return nil, nil, fmt.Errorf("onnx: output tensor %v: %w", shape, err)
	}
	return t, buf, nil
}

// column makes the Arrow column over the buffer ONNX Runtime wrote; it
// takes its own reference to the buffer.
func (o output) column(buf *memory.Buffer, rows int) arrow.Array {
	vals := array.NewData(o.elem, rows*o.width, []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer vals.Release()
	if o.typ == o.elem {
		return array.MakeFromData(vals)
	}
	list := array.NewData(o.typ, rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
	defer list.Release()
	return array.MakeFromData(list)
}
