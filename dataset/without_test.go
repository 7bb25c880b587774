package dataset_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
)

// WithoutRows keeps every row but those dropped, in order, whichever
// rows they are, and holds no memory once released.
func TestWithoutRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1, 2, 3, 4, 5}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	for _, drop := range [][]int{nil, {0}, {5}, {2, 3}, {0, 2, 5}, {0, 1, 2, 3, 4, 5}} {
		t.Run(fmt.Sprint(drop), func(t *testing.T) {
			out, err := dataset.WithoutRows(mem, rec, drop)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			var want []int64
			for i := range int64(6) {
				if !slices.Contains(drop, int(i)) {
					want = append(want, i)
				}
			}
			if got := out.Column(0).(*array.Int64).Int64Values(); !slices.Equal(got, want) && len(want)+len(got) > 0 {
				t.Fatalf("kept %v, want %v", got, want)
			}
		})
	}
}
