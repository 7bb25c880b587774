package tensor

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

var (
	// ErrType reports a column that is not a list of float32.
	ErrType = errors.New("tensor: column is not a fixed_size_list<float32> or list<float32>")
	// ErrWidth reports rows of a different width than expected.
	ErrWidth = errors.New("tensor: wrong row width")
	// ErrNull reports a null row or a null value inside a row.
	ErrNull = errors.New("tensor: null value")
)

// RowError is an error of one row of a tensor column: a null, a row of the
// wrong width, a null value (its Err wraps ErrNull or ErrWidth). Row counts
// from 0 within the array read. It is the project's one row error type.
type RowError = device.RowError

// Type is the type of a tensor column of width values a row:
// fixed_size_list<item: float32>[width], its items nullable as Arrow's
// readers give them back (a tensor a model reads holds no null all the
// same). It is the one spelling of the type in the project.
func Type(width int) *arrow.FixedSizeListType {
	return arrow.FixedSizeListOf(int32(width), arrow.PrimitiveTypes.Float32)
}

// Width returns the row width d of a fixed_size_list<float32>[d] type, or 0
// for a list<float32> or large_list<float32> type, whose width is only known
// from its data. It fails for any other type.
func Width(dt arrow.DataType) (int, error) {
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		if t.Elem().ID() == arrow.FLOAT32 {
			return int(t.Len()), nil
		}
	case *arrow.ListType:
		if t.Elem().ID() == arrow.FLOAT32 {
			return 0, nil
		}
	case *arrow.LargeListType:
		if t.Elem().ID() == arrow.FLOAT32 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("%w: got %s", ErrType, dt)
}

// Float32 returns the values of a tensor column as an arr.Len()×width
// row-major matrix, zero-copy. Row numbers in errors count from 0 within
// arr; the error is about the first row that is null, has another number
// of values than width, or holds a null value.
func Float32(arr arrow.Array, width int) ([]float32, error) {
	n := arr.Len()
	var values arrow.Array
	var start int
	switch a := arr.(type) {
	case *array.FixedSizeList:
		if got, err := Width(a.DataType()); err != nil {
			return nil, err
		} else if got != width {
			return nil, fmt.Errorf("%w: fixed_size_list of %d values, want %d", ErrWidth, got, width)
		}
		values, start = a.ListValues(), a.Offset()*width
	case array.ListLike:
		if _, err := Width(a.DataType()); err != nil {
			return nil, err
		}
		if n > 0 {
			b, _ := a.ValueOffsets(0)
			start = int(b)
		}
		values = a.ListValues()
	default:
		return nil, fmt.Errorf("%w: got %s", ErrType, arr.DataType())
	}
	v := values.(*array.Float32)
	if err := checkRows(arr, v, width); err != nil {
		return nil, err
	}
	return v.Float32Values()[start : start+n*width], nil
}

// checkRows returns a RowError for the first row of a list-like arr that
// is null, does not hold width values, or holds a null value.
func checkRows(arr arrow.Array, values *array.Float32, width int) error {
	list := arr.(array.ListLike)
	_, fixed := arr.(*array.FixedSizeList)
	if fixed && arr.NullN() == 0 && values.NullN() == 0 {
		return nil
	}
	for i := range arr.Len() {
		if arr.IsNull(i) {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w: the row is null", ErrNull)}
		}
		b, e := list.ValueOffsets(i)
		if int(e-b) != width {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w: %d values, want %d", ErrWidth, e-b, width)}
		}
		if values.NullN() > 0 && firstNull(values, int(b), int(e)) >= 0 {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w in the row", ErrNull)}
		}
	}
	return nil
}

// firstNull returns the first null index of arr in [from, to), or -1.
func firstNull(arr arrow.Array, from, to int) int {
	for i := from; i < to; i++ {
		if arr.IsNull(i) {
			return i
		}
	}
	return -1
}

// NewFixedSizeList returns a fixed_size_list<float32>[width] array of
// rows rows over the values in buf (as made by [NewBuffer]). It takes over
// the caller's reference to buf.
func NewFixedSizeList(buf *memory.Buffer, rows, width int) *array.FixedSizeList {
	defer buf.Release() // NewData holds its own reference
	vals := array.NewData(arrow.PrimitiveTypes.Float32, rows*width, []*memory.Buffer{nil, buf}, nil, 0, 0)
	defer vals.Release()
	list := array.NewData(Type(width), rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
	defer list.Release()
	return array.NewFixedSizeListData(list)
}

// NewBuffer allocates a buffer of n float32 values from mem and returns it
// with a view of its values. The values are not zeroed.
func NewBuffer(mem memory.Allocator, n int) (*memory.Buffer, []float32) {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * arrow.Float32SizeBytes)
	return buf, arrow.Float32Traits.CastFromBytes(buf.Bytes())
}
