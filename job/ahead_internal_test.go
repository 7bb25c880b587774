package job

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// source yields n records of rows rows each (ids counted on from 0) and
// then err, if any, as the job's sources do: it ends once its context is
// done, releasing what it does not yield, and goes on whatever yield
// says. made counts the records it made.
func source(mem memory.Allocator, n, rows int, err error, made *int) func(context.Context) iter.Seq2[arrow.RecordBatch, error] {
	return func(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
		return func(yield func(arrow.RecordBatch, error) bool) {
			for i := range n {
				if ctx.Err() != nil {
					return
				}
				*made = i + 1
				yield(arrowtest.IDs(mem, i*rows, rows), nil)
			}
			if err != nil {
				yield(nil, err)
			}
		}
	}
}

// recordSize is the bytes ahead counts for a record of rows ids.
func recordSize(mem memory.Allocator, rows int) int64 {
	rec := arrowtest.IDs(mem, 0, rows)
	defer rec.Release()
	return util.TotalRecordSize(rec)
}

func TestAheadYieldsEveryRecordInOrder(t *testing.T) {
	mem := arrowtest.Allocator(t)
	bad := errors.New("the model failed")
	var made int
	var ids []int64
	var got error
	for rec, err := range ahead(t.Context(), source(mem, 50, 7, bad, &made), 1<<10) {
		if err != nil {
			got = err
			continue
		}
		ids = append(ids, arrowtest.Int64s(t, "id", rec)...)
		rec.Release()
	}
	if !slices.Equal(ids, arrowtest.Seq(50*7)) {
		t.Fatalf("got ids %v, want 0 to %d in order", ids, 50*7-1)
	}
	if !errors.Is(got, bad) {
		t.Fatalf("the source's error: got %v, want %v", got, bad)
	}
}

// The queue holds records of up to its budget's bytes: with the consumer
// holding the first record, the source has made as many as fit, and one
// more it waits to queue.
func TestAheadBoundsTheQueuedBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		size := recordSize(mem, 16)
		const fit = 4
		var made int
		hold := make(chan struct{})
		seen := 0
		for rec, err := range ahead(t.Context(), source(mem, 40, 16, nil, &made), fit*size) {
			if err != nil {
				t.Fatal(err)
			}
			if seen == 0 {
				go func() {
					synctest.Wait() // the source blocked, the consumer holding the first
					if made != fit+1 {
						t.Errorf("the source made %d records ahead of a consumer holding one, want %d (a budget of %d of %d bytes, and one waiting)", made, fit+1, fit, size)
					}
					close(hold)
				}()
				<-hold
			}
			seen++
			rec.Release()
		}
		if seen != 40 {
			t.Fatalf("got %d records, want 40", seen)
		}
	})
}

// A record above the budget passes alone, rather than never.
func TestAheadPassesARecordAboveTheBudget(t *testing.T) {
	mem := arrowtest.Allocator(t)
	var made int
	rows := 0
	for rec, err := range ahead(t.Context(), source(mem, 3, 1000, nil, &made), 8) {
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	if rows != 3000 {
		t.Fatalf("got %d rows, want 3000", rows)
	}
}

// Leaving the loop early stops the source and releases what was queued;
// no goroutine is left (TestMain's goleak) and every buffer is back.
func TestAheadLeftEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		const fit = 10
		var made int
		seen := 0
		for rec := range ahead(t.Context(), source(mem, 1000, 4, nil, &made), fit*recordSize(mem, 4)) {
			rec.Release()
			if seen++; seen == 3 {
				synctest.Wait() // records queued ahead, to be released
				break
			}
		}
		if made != 3+fit {
			t.Fatalf("the source made %d records: want 3 taken and %d queued, then none", made, fit)
		}
	})
}

// A cancelled context ends the records at once; what was queued is
// released, not yielded.
func TestAheadCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var made int
		seen := 0
		for rec, err := range ahead(ctx, source(mem, 1000, 4, nil, &made), 10*recordSize(mem, 4)) {
			if err != nil {
				t.Fatal(err)
			}
			rec.Release()
			if seen++; seen == 2 {
				cancel()
			}
		}
		if seen != 2 {
			t.Fatalf("%d records yielded after the context was cancelled, want none", seen-2)
		}
		if made == 1000 {
			t.Fatal("the source went on after the context was cancelled")
		}
	})
}
