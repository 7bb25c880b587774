package online_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

// produce sends recs on a new channel, every gap, then closes it; it
// releases the records it could not send once ctx ends.
func produce(ctx context.Context, recs []arrow.RecordBatch, gap time.Duration) <-chan arrow.RecordBatch {
	in := make(chan arrow.RecordBatch)
	go func() {
		defer close(in)
		for i, r := range recs {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				arrowtest.Release(recs[i:])
				return
			}
			select {
			case in <- r:
			case <-ctx.Done():
				arrowtest.Release(recs[i:])
				return
			}
		}
	}()
	return in
}

// collect drains a stream, checking one result per record with exactly its
// rows, and returns the y values and the final error.
func collect(t *testing.T, ch <-chan predict.Result, sizes []int) (ys []int64, err error) {
	t.Helper()
	i := 0
	for r := range ch {
		if r.Err != nil {
			err = r.Err
			continue
		}
		if err != nil {
			t.Fatal("result after the error result")
		}
		if r.Batch != i || int(r.Record.NumRows()) != sizes[i] {
			t.Fatalf("result %d: record %d with %d rows, want %d", i, r.Batch, r.Record.NumRows(), sizes[i])
		}
		ys = append(ys, arrowtest.Int64s(t, "y", r.Record)...)
		r.Record.Release()
		i++
	}
	return ys, err
}

// Huge and tiny records sent fast: one result per record, with its rows,
// every row predicted once, in order (the fake device doubles ids).
func TestStreamEveryRecordExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 20 {
		mem := arrowtest.Allocator(t)
		sizes := make([]int, 1+rng.IntN(30))
		for i := range sizes {
			sizes[i] = rng.IntN(5 * 16)
		}
		if trial == 0 {
			sizes = []int{5000, 0, 1, 3000} // records far beyond the queue bound
		}
		total := 0
		for _, n := range sizes {
			total += n
		}
		want := fakedev.Doubled(total)
		m := &fakedev.Model{}
		var st predict.Stats
		sp := fakedev.NewPredictor(t, m, predict.WithBatchSizes(4, 16), predict.WithGroups(1+trial%2), predict.WithAllocator(mem), predict.WithStats(func(s predict.Stats) { st = s }))
		got, err := collect(t, online.Stream(t.Context(), sp, arrowtest.IDSchema, produce(t.Context(), arrowtest.Chunked(mem, sizes), 0), online.Options{QueueRows: 64}), sizes)
		if err != nil {
			t.Fatal(err)
		}
		if st.Rows != int64(total) || st.Batches == 0 && total > 0 {
			t.Fatalf("stats %+v for %d rows", st, total)
		}
		if !slices.Equal(got, want) || len(got) != total {
			t.Fatalf("trial %d, sizes %v: stream %d rows, predictor %d, or they differ", trial, sizes, len(got), len(want))
		}
		m.AssertLifecycle(t, int32(1+trial%2))
	}
}

// One row every millisecond: each waits at most the delay for its batch.
func TestStreamSlowProducer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSizes(2, 8), predict.WithAllocator(mem))
		const n = 40
		sizes := slices.Repeat([]int{1}, n)
		began := time.Now()
		ch := online.Stream(t.Context(), p, arrowtest.IDSchema, produce(t.Context(), arrowtest.Chunked(mem, sizes), time.Millisecond), online.Options{MaxDelay: 5 * time.Millisecond})
		i := 0
		for r := range ch {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			sent := time.Duration(i+1) * time.Millisecond
			if wait := time.Since(began) - sent; wait > 5*time.Millisecond {
				t.Fatalf("record %d waited %v", i, wait)
			}
			if y := arrowtest.Int64s(t, "y", r.Record); len(y) != 1 || y[0] != 2*int64(i) {
				t.Fatalf("record %d: %v", i, y)
			}
			r.Record.Release()
			i++
		}
		if i != n {
			t.Fatalf("%d results for %d records", i, n)
		}
		m.AssertLifecycle(t, 1)
		for _, b := range m.Batches() {
			if b.Rows+b.Padding != 8 && b.Rows+b.Padding != 2 {
				t.Fatalf("batch %+v not of an allowed size", b)
			}
		}
	})
}

// Cancelling stops the stream: the channel closes after the session has
// shut down, and nothing leaks.
func TestStreamCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sizes := slices.Repeat([]int{3}, 100)
		in := produce(ctx, arrowtest.Chunked(mem, sizes), time.Millisecond)
		ch := online.Stream(ctx, p, arrowtest.IDSchema, in, online.Options{})
		got := 0
		for r := range ch {
			if r.Err != nil {
				t.Fatalf("error after cancel: %v", r.Err)
			}
			r.Record.Release()
			if got++; got == 10 {
				cancel()
			}
		}
		if got < 10 || got > 11 {
			t.Fatalf("%d results", got)
		}
		m.AssertLifecycle(t, 1)
		for r := range in { // the producer releases what it did not send, then closes in
			r.Release()
		}
	})
}

// A failing batch ends the stream with its error, after the records
// answered before it; a record of the wrong schema too.
func TestStreamFailure(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := &fakedev.Model{Fail: true, FailAt: 2}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sizes := slices.Repeat([]int{4}, 10)
	in := produce(ctx, arrowtest.Chunked(mem, sizes), 0)
	ys, err := collect(t, online.Stream(ctx, p, arrowtest.IDSchema, in, online.Options{MaxDelay: online.NoDelay}), sizes)
	if !errors.Is(err, fakedev.ErrInjected) || !strings.Contains(err.Error(), "stream record 2") || len(ys) != 8 {
		t.Fatalf("%d rows, then %v", len(ys), err)
	}
	m.AssertLifecycle(t, 1)
	cancel() // the producer stops and releases what it did not send
	for r := range in {
		r.Release()
	}

	m = &fakedev.Model{}
	p = fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	recs := append(arrowtest.Chunked(mem, []int{2, 3}), arrowtest.FloatID(mem))
	ys, err = collect(t, online.Stream(t.Context(), p, arrowtest.IDSchema, produce(t.Context(), recs, 0), online.Options{}), []int{2, 3})
	if err == nil || !strings.Contains(err.Error(), "stream record 2") || !slices.Equal(ys, fakedev.Doubled(5)) {
		t.Fatalf("%v, then %v", ys, err)
	}
	m.AssertLifecycle(t, 1)
}

func ExampleStream() {
	p, _ := predict.New(&fakedev.Model{}, predict.WithBatchSizes(4, 16))
	in := make(chan arrow.RecordBatch)
	go func() { // a producer: records of any sizes, at any pace
		defer close(in)
		for i, n := range []int{3, 20, 1} {
			in <- arrowtest.IDs(memory.DefaultAllocator, 100*i, n)
		}
	}()
	for r := range online.Stream(context.Background(), p, arrowtest.IDSchema, in, online.Options{MaxDelay: time.Millisecond}) {
		if r.Err != nil {
			panic(r.Err)
		}
		fmt.Println("record", r.Batch, "rows", r.Record.NumRows(), "first y", r.Record.Column(0).(*array.Int64).Value(0))
		r.Record.Release()
	}
	// The channel is closed: the session has shut down.
	// Output:
	// record 0 rows 3 first y 0
	// record 1 rows 20 first y 200
	// record 2 rows 1 first y 400
}
