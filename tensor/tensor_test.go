package tensor_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/tensor"
)

func TestListKindsAndOffsets(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rows := [][]float32{{1, 2}, {3, 4}, {5, 6}, {7, 8}}
	for _, b := range []array.ListLikeBuilder{
		array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32),
		array.NewLargeListBuilder(mem, arrow.PrimitiveTypes.Float32),
		array.NewFixedSizeListBuilder(mem, 2, arrow.PrimitiveTypes.Float32),
	} {
		vb := b.ValueBuilder().(*array.Float32Builder)
		for _, r := range rows {
			b.Append(true)
			vb.AppendValues(r, nil)
		}
		arr := b.NewArray()
		b.Release()
		slice := array.NewSlice(arr, 1, 3)
		got, err := tensor.Float32(slice, 2)
		if err != nil || !slices.Equal(got, []float32{3, 4, 5, 6}) {
			t.Errorf("%s sliced [1,3): %v, %v", arr.DataType(), got, err)
		}
		if _, err := tensor.Float32(arr, 3); !errors.Is(err, tensor.ErrWidth) {
			t.Errorf("%s width 3: err %v", arr.DataType(), err)
		}
		slice.Release()
		arr.Release()
	}
}

func TestWrongType(t *testing.T) {
	mem := arrowtest.Allocator(t)
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float64)
	defer b.Release()
	b.Append(true)
	b.ValueBuilder().(*array.Float64Builder).Append(1)
	arr := b.NewArray()
	defer arr.Release()
	if _, err := tensor.Float32(arr, 1); !errors.Is(err, tensor.ErrType) {
		t.Fatalf("list<float64>: err %v", err)
	}
	if _, err := tensor.Width(arrow.PrimitiveTypes.Float32); !errors.Is(err, tensor.ErrType) {
		t.Fatalf("float32: err %v", err)
	}
	if w, err := tensor.Width(arrow.FixedSizeListOf(7, arrow.PrimitiveTypes.Float32)); w != 7 || err != nil {
		t.Fatalf("fixed_size_list[7]: %d, %v", w, err)
	}
}

func TestNewFixedSizeList(t *testing.T) {
	mem := arrowtest.Allocator(t)
	buf, v := tensor.NewBuffer(mem, 6)
	copy(v, []float32{1, 2, 3, 4, 5, 6})
	arr := tensor.NewFixedSizeList(buf, 2, 3)
	defer arr.Release()
	got, err := tensor.Float32(arr, 3)
	if err != nil || !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) || arr.Len() != 2 {
		t.Fatalf("%v, %v", got, err)
	}
}

// The error names the first row a model cannot read, whatever is wrong
// with it: a ragged row before a null row, a null value before either.
func TestFirstBadRow(t *testing.T) {
	mem := arrowtest.Allocator(t)
	cases := []struct {
		name    string
		rows    [][]float32 // nil: a null row
		nullAt  [2]int      // row, value of a null value; -1: none
		wantRow int
		want    error
	}{
		{"ragged then null", [][]float32{{1, 2}, {3, 4, 5}, nil, {6, 7}}, [2]int{-1, -1}, 1, tensor.ErrWidth},
		{"null then ragged", [][]float32{{1, 2}, nil, {3}, {6, 7}}, [2]int{-1, -1}, 1, tensor.ErrNull},
		{"null value then ragged", [][]float32{{1, 2}, {3, 4}, {5}}, [2]int{1, 0}, 1, tensor.ErrNull},
		{"empty then null value", [][]float32{{}, {3, 4}}, [2]int{1, 1}, 0, tensor.ErrWidth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
			defer b.Release()
			vb := b.ValueBuilder().(*array.Float32Builder)
			for i, r := range c.rows {
				if r == nil {
					b.AppendNull()
					continue
				}
				b.Append(true)
				for j, v := range r {
					if i == c.nullAt[0] && j == c.nullAt[1] {
						vb.AppendNull()
						continue
					}
					vb.Append(v)
				}
			}
			arr := b.NewArray()
			defer arr.Release()
			_, err := tensor.Float32(arr, 2)
			var re *tensor.RowError
			if !errors.As(err, &re) || re.Row != int64(c.wantRow) || !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v at row %d", err, c.want, c.wantRow)
			}
		})
	}
}
