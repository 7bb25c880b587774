//go:build unix

package online_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The Batcher's own CPU a request (batcher-ns/request): 64 callers send
// one-row requests in a closed loop to a model that spins 3µs a batch row
// (the MLP 64-256-256-10 on one OpenBLAS thread), on one session group and
// on two; the process's CPU less the model's, a request. It is what keeps
// the Batcher from the Predictor's rate at the same batches. The model's
// CPU is taken as spun; on a shared machine whose cores are taken away
// at times the figure moves, so compare runs made side by side.
func BenchmarkBatcherRequestCost(b *testing.B) {
	const callers, perRow = 64, 3 * time.Microsecond
	for _, groups := range []int{1, 2} {
		b.Run(map[int]string{1: "1group", 2: "2groups"}[groups], func(b *testing.B) {
			mem := memory.NewGoAllocator()
			m := &fakedev.Model{Spin: true, Takes: func(rows int) time.Duration { return time.Duration(rows) * perRow }}
			p := fakedev.NewPredictor(b, m, predict.WithBatchSizes(16, 32, 64, 128, 256), predict.WithGroups(groups), predict.WithAllocator(mem))
			bt, err := online.NewBatcher(b.Context(), p, arrowtest.IDSchema, online.Options{QueueRows: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			recs := make([]arrow.RecordBatch, callers)
			for i := range recs {
				recs[i] = arrowtest.IDs(mem, i, 1)
				defer recs[i].Release()
			}
			var sent atomic.Int64
			b.ReportAllocs()
			began := cpuTime(b)
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					for sent.Add(1) <= int64(b.N) {
						out, err := bt.Predict(context.Background(), recs[c])
						if err != nil {
							b.Error(err)
							return
						}
						out.Release()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			cpu := cpuTime(b) - began
			if err := bt.Close(b.Context()); err != nil {
				b.Fatal(err)
			}
			st := bt.Stats()
			model := time.Duration(st.Rows+st.PaddedRows) * perRow
			b.ReportMetric(float64((cpu-model).Nanoseconds())/float64(b.N), "batcher-ns/request")
			b.ReportMetric(float64(st.Rows+st.PaddedRows)/float64(max(st.Batches, 1)), "rows/batch")
		})
	}
}
