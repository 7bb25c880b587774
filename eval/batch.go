package eval

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/tensor"
)

var (
	// ErrLabel reports a label column that is missing, of the wrong type,
	// or holds nulls.
	ErrLabel = errors.New("eval: bad label column")
	// ErrPrediction reports a prediction column that is missing, of the
	// wrong type, or holds nulls.
	ErrPrediction = errors.New("eval: bad prediction column")
	// ErrClasses reports labels or predictions outside the classes a
	// metric was given or the model's probabilities imply.
	ErrClasses = errors.New("eval: inconsistent number of classes")
	// ErrMerge reports a Merge of two metrics of different kinds or shapes.
	ErrMerge = errors.New("eval: cannot merge metrics")
)

// RowError is a metric's error about one row: a null label or prediction,
// or a label outside the metric's classes. Row counts from the start of
// the batch given to Update; Evaluate wraps it in one whose Row counts
// from the start of the dataset, so a caller can name the input file and
// row (errors.As finds that outer one first). It is the project's one row
// error type.
type RowError = device.RowError

// Batch is the real rows of one evaluated batch: the labels and the model's
// predictions, row-aligned. Its accessors convert columns to slices once
// and share them between metrics. The slices are valid during Update only.
type Batch struct {
	Index       int               // batch index
	Labels      arrow.Array       // the label column
	Predictions arrow.RecordBatch // the model's outputs (and passthrough columns)

	ints   map[string][]int64
	floats map[string][]float64
}

const labelKey = "\x00label"

// Rows returns the number of rows of the batch.
func (b *Batch) Rows() int { return b.Labels.Len() }

// LabelClasses returns the labels as class indices (integers, or bool as 0/1).
func (b *Batch) LabelClasses() ([]int64, error) {
	return b.cachedInts(labelKey, func() ([]int64, error) {
		v, err := toInts(b.Labels)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrLabel, err)
		}
		return v, nil
	})
}

// LabelValues returns the labels as float64.
func (b *Batch) LabelValues() ([]float64, error) {
	return b.cachedFloats(labelKey, func() ([]float64, error) {
		v, err := toFloats(b.Labels)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrLabel, err)
		}
		return v, nil
	})
}

// Classes returns the integer prediction column name as class indices.
func (b *Batch) Classes(name string) ([]int64, error) {
	return b.cachedInts(name, func() ([]int64, error) {
		col, err := b.column(name)
		if err != nil {
			return nil, err
		}
		v, err := toInts(col)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrPrediction, name, err)
		}
		return v, nil
	})
}

// Values returns the numeric prediction column name (or a one-value
// fixed_size_list<float32> column) as float64.
func (b *Batch) Values(name string) ([]float64, error) {
	return b.cachedFloats(name, func() ([]float64, error) {
		col, err := b.column(name)
		if err != nil {
			return nil, err
		}
		if _, ok := col.(*array.FixedSizeList); ok {
			x, err := tensor.Float32(col, 1)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q: %w", ErrPrediction, name, err)
			}
			out := make([]float64, len(x))
			for i, v := range x {
				out[i] = float64(v)
			}
			return out, nil
		}
		v, err := toFloats(col)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrPrediction, name, err)
		}
		return v, nil
	})
}

// Probabilities returns the fixed_size_list<float32>[k] column name as a
// row-major rows×k matrix (zero-copy), and k.
func (b *Batch) Probabilities(name string) ([]float32, int, error) {
	col, err := b.column(name)
	if err != nil {
		return nil, 0, err
	}
	k, err := tensor.Width(col.DataType())
	if err == nil && k == 0 {
		err = fmt.Errorf("%w: got %s", tensor.ErrType, col.DataType())
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: column %q: %w", ErrPrediction, name, err)
	}
	p, err := tensor.Float32(col, k)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: column %q: %w", ErrPrediction, name, err)
	}
	return p, k, nil
}

func (b *Batch) column(name string) (arrow.Array, error) {
	idx := b.Predictions.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: no column %q in the predictions %s", ErrPrediction, name, b.Predictions.Schema())
	}
	return b.Predictions.Column(idx[0]), nil
}

func (b *Batch) cachedInts(key string, f func() ([]int64, error)) ([]int64, error) {
	return cached(&b.ints, key, f)
}

func (b *Batch) cachedFloats(key string, f func() ([]float64, error)) ([]float64, error) {
	return cached(&b.floats, key, f)
}

// cached returns (*m)[key], computing and keeping it on first use.
func cached[T any](m *map[string][]T, key string, f func() ([]T, error)) ([]T, error) {
	if v, ok := (*m)[key]; ok {
		return v, nil
	}
	v, err := f()
	if err != nil {
		return nil, err
	}
	if *m == nil {
		*m = map[string][]T{}
	}
	(*m)[key] = v
	return v, nil
}

// checkClassType reports whether a column of type dt can hold class labels.
func checkClassType(dt arrow.DataType) error {
	if arrow.IsInteger(dt.ID()) || dt.ID() == arrow.BOOL {
		return nil
	}
	return fmt.Errorf("type %s, want an integer or bool", dt)
}

// checkValueType reports whether a column of type dt can hold numbers.
func checkValueType(dt arrow.DataType) error {
	if arrow.IsInteger(dt.ID()) || arrow.IsFloating(dt.ID()) || dt.ID() == arrow.BOOL {
		return nil
	}
	return fmt.Errorf("type %s, want a number", dt)
}

func firstNull(arr arrow.Array) error {
	for i := range arr.Len() {
		if arr.IsNull(i) {
			return &RowError{Row: int64(i), Err: errors.New("null")}
		}
	}
	return nil
}

func toInts(arr arrow.Array) ([]int64, error) {
	if err := checkClassType(arr.DataType()); err != nil {
		return nil, err
	}
	if arr.NullN() > 0 {
		return nil, firstNull(arr)
	}
	if a, ok := arr.(*array.Int64); ok {
		return a.Int64Values(), nil
	}
	out := make([]int64, arr.Len())
	for i := range out {
		out[i] = int64(numberAt(arr, i))
	}
	return out, nil
}

func toFloats(arr arrow.Array) ([]float64, error) {
	if err := checkValueType(arr.DataType()); err != nil {
		return nil, err
	}
	if arr.NullN() > 0 {
		return nil, firstNull(arr)
	}
	if a, ok := arr.(*array.Float64); ok {
		return a.Float64Values(), nil
	}
	out := make([]float64, arr.Len())
	for i := range out {
		out[i] = numberAt(arr, i)
	}
	return out, nil
}

// numberAt reads row i of a numeric or bool array.
func numberAt(arr arrow.Array, i int) float64 {
	switch a := arr.(type) {
	case *array.Boolean:
		if a.Value(i) {
			return 1
		}
		return 0
	case *array.Int8:
		return float64(a.Value(i))
	case *array.Int16:
		return float64(a.Value(i))
	case *array.Int32:
		return float64(a.Value(i))
	case *array.Int64:
		return float64(a.Value(i))
	case *array.Uint8:
		return float64(a.Value(i))
	case *array.Uint16:
		return float64(a.Value(i))
	case *array.Uint32:
		return float64(a.Value(i))
	case *array.Uint64:
		return float64(a.Value(i))
	case *array.Float16:
		return float64(a.Value(i).Float32())
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	}
	panic(fmt.Sprintf("eval: not a number: %s", arr.DataType()))
}
