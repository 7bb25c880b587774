package pad_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
)

// BenchmarkPadStrip pads a batch of 64-float features to 256 rows and strips
// it again: a full batch (the steady state) and a short tail of 100 rows.
func BenchmarkPadStrip(b *testing.B) {
	mem := memory.NewGoAllocator()
	for _, rows := range []int{256, 100} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			for rec := range dataset.UniformTensors(mem, rows, 64, rows, 1).Records() {
				rec.Retain()
				defer rec.Release()
				p, err := pad.New(mem, rec.Schema(), 256)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Release()
				start := arrowtest.Mallocs()
				for b.Loop() {
					padded, _, err := p.Pad(rec)
					if err != nil {
						b.Fatal(err)
					}
					stripped, _, err := pad.Strip(padded)
					if err != nil {
						b.Fatal(err)
					}
					stripped.Release()
					padded.Release()
				}
				arrowtest.ReportPerBatch(b, rows, 1, start)
			}
		})
	}
}
