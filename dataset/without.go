package dataset

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// WithoutRows returns rec without the rows at the indices drop
// (ascending), as a record the caller releases: the runs of rec between
// them, joined (copied unless one run is left, which is a slice of rec).
func WithoutRows(mem memory.Allocator, rec arrow.RecordBatch, drop []int) (arrow.RecordBatch, error) {
	var runs []arrow.RecordBatch
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	from := int64(0)
	for _, i := range drop {
		if int64(i) > from {
			runs = append(runs, rec.NewSlice(from, int64(i)))
		}
		from = int64(i) + 1
	}
	if from < rec.NumRows() {
		runs = append(runs, rec.NewSlice(from, rec.NumRows()))
	}
	if len(runs) == 0 {
		return rec.NewSlice(0, 0), nil
	}
	return Concat(mem, rec.Schema(), runs)
}
