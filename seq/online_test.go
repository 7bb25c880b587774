package seq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

// TestOnlineBatcher: rows sent one request each by concurrent callers
// through the online Batcher, whose batches are windows too, get what
// each row run alone gives.
func TestOnlineBatcher(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 400)
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(m, predict.WithBatchSizes(8, 32, 64), predict.WithGroups(2), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := online.NewBatcher(ctx, p, tokenSchema, online.Options{MaxDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(mem, data, 1)
	got := make([][]float32, len(data))
	var wg sync.WaitGroup
	errs := make(chan error, len(data))
	for i, rec := range recs {
		wg.Go(func() {
			out, err := b.Predict(ctx, rec)
			if err != nil {
				errs <- err
				return
			}
			defer out.Release()
			got[i] = vector(out, "embedding")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	for i, ids := range data {
		if len(ids) > 512 {
			ids = ids[:512]
		}
		want, _, _ := seqtest.Reference(width, ids)
		if !near(got[i], want, 1e-6) {
			t.Fatalf("row %d: %v through the Batcher, %v alone", i, got[i], want)
		}
	}
	if st := m.Stats(); st.Rows != int64(len(data)) {
		t.Fatalf("the model ran %d rows, %d were sent", st.Rows, len(data))
	}
}

func vector(rec arrow.RecordBatch, name string) []float32 {
	col := rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.FixedSizeList)
	w := int(col.DataType().(*arrow.FixedSizeListType).Len())
	off := col.Offset() * w // a request's rows are a slice of its window's
	return append([]float32(nil), col.ListValues().(*array.Float32).Float32Values()[off:off+w]...)
}
