package dataset_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
)

// Records of 3, 0 and 6 rows re-chunked into batches of exactly 4 rows,
// the last one shorter.
func ExampleDataset_Batches() {
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	var recs []arrow.RecordBatch
	next := int64(0)
	for _, n := range []int{3, 0, 6} {
		for range n {
			b.Field(0).(*array.Int64Builder).Append(next)
			next++
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		recs = append(recs, rec)
	}

	ds := dataset.FromRecords(schema, recs...)
	for batch, err := range ds.Batches(mem, 4) {
		if err != nil {
			panic(err)
		}
		fmt.Println(batch.NumRows(), "rows:", batch.Column(0))
	}
	// Output:
	// 4 rows: [0 1 2 3]
	// 4 rows: [4 5 6 7]
	// 1 rows: [8]
}
