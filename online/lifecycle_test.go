package online_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

// Close answers what is queued; past its context, queued requests fail,
// the running batch is cancelled, and the session still shuts down once.
func TestBatcherCloseDrainsOrGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		b := newBatcher(t, m, online.Options{MaxDelay: time.Hour}, predict.WithBatchSize(8), predict.WithAllocator(mem))
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ask(t, t.Context(), b, mem, 0, 3); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		if err := b.Close(t.Context()); err != nil { // runs the queued rows without waiting an hour
			t.Fatal(err)
		}
		wg.Wait()
		m.AssertLifecycle(t, 1)

		m = &fakedev.Model{Block: make(chan struct{})}
		b = newBatcher(t, m, online.Options{MaxDelay: online.NoDelay}, predict.WithBatchSize(2), predict.WithAllocator(mem))
		errs := make(chan error, 2)
		for i := range 2 {
			wg.Go(func() { errs <- ask(t, t.Context(), b, mem, 2*i, 2) })
			synctest.Wait()
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		// The queued request and the one whose batch was cut both fail
		// with ErrClosed (a server answers 503, not "canceled"), counted.
		for err := range errs {
			if !errors.Is(err, online.ErrClosed) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("request at a Close past its deadline: %v", err)
			}
		}
		if st := b.Stats(); st.Failures != 2 {
			t.Fatalf("stats after Close cut two requests: %+v", st)
		}
		m.AssertLifecycle(t, 1)

		// A request over before it arrives counts as a timeout or a
		// cancellation, as one that ends in the queue does.
		m = &fakedev.Model{}
		b = newBatcher(t, m, online.Options{}, predict.WithBatchSize(2), predict.WithAllocator(mem))
		expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel2()
		cancelled, cancel3 := context.WithCancel(t.Context())
		cancel3()
		for _, ctx := range []context.Context{expired, cancelled} {
			if err := ask(t, ctx, b, mem, 0, 1); err == nil {
				t.Fatal("a request over before it arrived was answered")
			}
		}
		if st := b.Stats(); st.Timeouts != 1 || st.Cancellations != 1 {
			t.Fatalf("stats after an expired and a cancelled request: %+v", st)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		m.AssertLifecycle(t, 1)
	})
}

// Thousands of requests from 64 goroutines, of random sizes up to three
// batches, with random cancels and deadlines, while the batcher is closed
// at the end: each gets exactly its rows or an error, nothing wedges, no
// goroutine or byte leaks, each session starts and shuts down once.
func TestBatcherCancellationStorm(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := &fakedev.Model{}
	const batch = 16
	b := newBatcher(t, m, online.Options{MaxDelay: 200 * time.Microsecond, QueueRows: 100 * batch}, predict.WithBatchSizes(4, batch), predict.WithGroups(2), predict.WithAllocator(mem))
	var wg sync.WaitGroup
	var answered, failed atomic.Int64
	for g := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 40 {
				ctx, cancel := context.WithCancel(t.Context())
				rctx, expire := ctx, context.CancelFunc(func() {})
				switch rng.IntN(4) {
				case 0:
					time.AfterFunc(time.Duration(rng.IntN(500))*time.Microsecond, cancel)
				case 1:
					rctx, expire = context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
				}
				err := ask(t, rctx, b, mem, 10_000*g+100*i, 1+rng.IntN(3*batch))
				expire()
				cancel()
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, online.ErrOverloaded):
					failed.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.AssertLifecycle(t, 2)
	s := b.Stats()
	if answered.Load()+failed.Load() != 64*40 || s.Requests != answered.Load() || s.QueuedRows != 0 || answered.Load() == 0 {
		t.Fatalf("answered %d, failed %d; stats %+v", answered.Load(), failed.Load(), s)
	}
	if s.Cancellations == 0 || s.Timeouts == 0 {
		t.Fatalf("the storm cancelled %d and timed out %d requests: it tests nothing", s.Cancellations, s.Timeouts)
	}
	t.Logf("answered %d; cancelled %d, timed out %d, refused %d; %d batches, padding %.1f%%",
		answered.Load(), s.Cancellations, s.Timeouts, s.Overloads, s.Batches, 100*s.PaddingWaste())
}

// Options that do not apply are refused when the Batcher or Stream is
// made, not ignored; so are bad options, a wrong schema, a failed start.
func TestBatcherBadInput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := &fakedev.Model{}
	for _, o := range []predict.Option{predict.WithPadding(true), predict.WithPrefetch(2),
		predict.WithSetAside(func(arrow.RecordBatch, error) {})} {
		p, err := predict.New(m, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := online.NewBatcher(t.Context(), p, arrowtest.IDSchema, online.Options{}); err == nil || !strings.Contains(err.Error(), "apply to Predict and All") {
			t.Fatalf("a dataset-only option accepted by a Batcher: %v", err)
		}
		for r := range online.Stream(t.Context(), p, arrowtest.IDSchema, nil, online.Options{}) {
			if r.Err == nil || !strings.Contains(r.Err.Error(), "apply to Predict and All") {
				t.Fatalf("a dataset-only option accepted by a Stream: %+v", r)
			}
		}
	}
	p, err := predict.New(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []online.Options{{MaxDelay: -2}, {QueueRows: -1}, {Timeout: -1}} {
		if _, err := online.NewBatcher(t.Context(), p, arrowtest.IDSchema, o); err == nil {
			t.Fatalf("bad options %+v accepted", o)
		}
	}
	for r := range online.Stream(t.Context(), p, arrowtest.IDSchema, nil, online.Options{Timeout: time.Second}) {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "Timeout") {
			t.Fatalf("a Stream took a request timeout: %+v", r)
		}
	}
	m.AssertLifecycle(t, 0)
	b := newBatcher(t, m, online.Options{}, predict.WithAllocator(mem))
	rec := arrowtest.FloatID(mem)
	defer rec.Release()
	if _, err := b.Predict(t.Context(), rec); !errors.Is(err, dataset.ErrSchemaMismatch) {
		t.Fatalf("wrong schema: %v", err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	m = &fakedev.Model{StartErr: fakedev.ErrInjected, StartErrReplica: 1}
	p, err = predict.New(m, predict.WithBatchSize(4), predict.WithReplicas(2), predict.WithGroups(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := online.NewBatcher(t.Context(), p, arrowtest.IDSchema, online.Options{}); !errors.Is(err, fakedev.ErrInjected) {
		t.Fatalf("start failure: %v", err)
	}
	if m.Live.Load() != 0 {
		t.Fatalf("%d sessions left running after a failed start", m.Live.Load())
	}
}

// The Predictor's WithStats function has the Batcher's totals once Close
// has shut the sessions down (it was ignored when batching lived in
// predict).
func TestBatcherStatsFunction(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := &fakedev.Model{}
	var got []predict.Stats
	b := newBatcher(t, m, online.Options{MaxDelay: online.NoDelay}, predict.WithBatchSize(4), predict.WithAllocator(mem),
		predict.WithStats(func(s predict.Stats) { got = append(got, s) }))
	if err := ask(t, t.Context(), b, mem, 0, 6); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("stats before Close: %+v", got)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Rows != 6 || got[0].Batches < 2 {
		t.Fatalf("stats %+v, want one call with 6 rows in 2 or more batches", got)
	}
	m.AssertLifecycle(t, 1)
}

func ExampleBatcher() {
	p, _ := predict.New(&fakedev.Model{}, predict.WithBatchSizes(8, 32))
	b, _ := online.NewBatcher(context.Background(), p, arrowtest.IDSchema, online.Options{MaxDelay: 2 * time.Millisecond})
	defer b.Close(context.Background())

	// Any number of goroutines may call Predict; here one asks for 5 rows.
	// No more come within 2ms, so they run padded to the allowed size 8.
	rec := arrowtest.IDs(memory.DefaultAllocator, 100, 5)
	defer rec.Release()
	out, err := b.Predict(context.Background(), rec)
	if err != nil {
		panic(err)
	}
	defer out.Release()
	s := b.Stats()
	fmt.Println(out.Column(0), s.Batches, s.PaddedRows)
	// Output: [200 202 204 206 208] 1 3
}
