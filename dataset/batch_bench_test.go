package dataset_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// BenchmarkBatches cuts 1M rows of 64 float32 features into batches of
// 256: "aligned" records hold whole batches (zero-copy slices), "unaligned"
// records make most batches span two records (a copy).
func BenchmarkBatches(b *testing.B) {
	const rows, batch = 1 << 20, 256
	for _, chunk := range []int{4096, 1000} {
		name := "aligned"
		if chunk%batch != 0 {
			name = "unaligned"
		}
		b.Run(fmt.Sprintf("%s/chunk=%d", name, chunk), func(b *testing.B) {
			mem := memory.NewGoAllocator()
			var recs []arrow.RecordBatch
			for rec, err := range dataset.UniformTensors(mem, rows, 64, chunk, 1).Records() {
				if err != nil {
					b.Fatal(err)
				}
				rec.Retain()
				recs = append(recs, rec)
			}
			defer arrowtest.Release(recs)
			ds := dataset.FromRecords(dataset.TensorSchema(64), recs...)
			start := arrowtest.Mallocs()
			for b.Loop() {
				for _, err := range ds.Batches(mem, batch) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			arrowtest.ReportPerBatch(b, rows, rows/batch, start)
		})
	}
}
