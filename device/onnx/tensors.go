//go:build onnx

package onnx

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ort "github.com/yalue/onnxruntime_go"

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
