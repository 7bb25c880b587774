package online_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/internal/fakedev"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

func newBatcher(t *testing.T, m device.Model, o online.Options, opts ...predict.Option) *online.Batcher {
	t.Helper()
	b, err := online.NewBatcher(t.Context(), fakedev.NewPredictor(t, m, opts...), arrowtest.IDSchema, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ask sends ids start..start+n-1 and checks the answer is 2·id for each
// row, in order. It returns the request's error.
func ask(t testing.TB, ctx context.Context, b *online.Batcher, mem memory.Allocator, start, n int) error {
	rec := arrowtest.IDs(mem, start, n)
	defer rec.Release()
	out, err := b.Predict(ctx, rec)
	if err != nil {
		return err
	}
	defer out.Release()
	ys := arrowtest.Int64s(t, "y", out)
	if len(ys) != n {
		t.Errorf("request of %d rows from %d: %d predictions", n, start, len(ys))
		return nil
	}
	for i, y := range ys {
		if y != 2*int64(start+i) {
			t.Errorf("request of %d rows from %d: row %d predicted %d, want %d", n, start, i, y, 2*(start+i))
			return nil
		}
	}
	return nil
}

func TestBatcherAnswersEveryRequestExactly(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := &fakedev.Model{}
	b := newBatcher(t, m, online.Options{MaxDelay: time.Millisecond, QueueRows: 1000}, predict.WithBatchSizes(4, 8, 16), predict.WithGroups(2), predict.WithReplicas(2), predict.WithAllocator(mem))
	var wg sync.WaitGroup
	sizes := []int{0, 1, 3, 16, 17, 40, 5, 0, 2}
	for g := range 8 {
		wg.Go(func() {
			for i, n := range sizes {
				if err := ask(t, t.Context(), b, mem, 1000*g+100*i, n); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.AssertLifecycle(t, 4)
	for _, cfg := range m.Configs() {
		if cfg.BatchSize != 8 || !slices.Equal(cfg.BatchSizes, []int{2, 4, 8}) || cfg.Replicas != 2 {
			t.Fatalf("session config %+v", cfg)
		}
	}
	s := b.Stats()
	if s.Requests != 8*int64(len(sizes)) || s.Rows != 8*84 || s.QueuedRows != 0 || s.Failures != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := ask(t, t.Context(), b, mem, 0, 1); !errors.Is(err, online.ErrClosed) {
		t.Fatalf("request after Close: %v", err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Not eager, a batch runs when full, or when its oldest row has waited the
// delay, padded to the smallest allowed size; never before.
func TestBatcherDispatchTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		obs := &recordingObserver{}
		b := newBatcher(t, m, online.Options{MaxDelay: 10 * time.Millisecond, NoEager: true, Observer: obs}, predict.WithBatchSizes(2, 4, 8), predict.WithAllocator(mem))
		defer b.Close(t.Context())
		var wg sync.WaitGroup
		send := func(start, n int) {
			wg.Go(func() {
				if err := ask(t, t.Context(), b, mem, start, n); err != nil {
					t.Error(err)
				}
			})
		}
		began := time.Now()
		send(0, 1)
		time.Sleep(6 * time.Millisecond)
		send(1, 1) // a later row does not restart the clock
		time.Sleep(3999 * time.Microsecond)
		synctest.Wait()
		if n := m.Predicts.Load(); n != 0 {
			t.Fatalf("%d batches before the delay", n)
		}
		time.Sleep(time.Microsecond)
		synctest.Wait()
		wg.Wait()
		if got := m.Batches(); len(got) != 1 || got[0].Rows != 2 || got[0].Padding != 0 {
			t.Fatalf("at the oldest row's delay (%v): batches %+v, want one of 2 rows", time.Since(began), got)
		}

		send(10, 3) // padded to 4 at the delay
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		wg.Wait()
		send(20, 8) // full: runs at once
		synctest.Wait()
		wg.Wait()
		want := []fakedev.Seen{{Index: 0, Rows: 2}, {Index: 1, Rows: 3, Padding: 1}, {Index: 2, Rows: 8}}
		if got := m.Batches(); !slices.Equal(got, want) {
			t.Fatalf("batches %+v, want %+v", got, want)
		}
		if s := b.Stats(); s.BatchSizes[2] != 1 || s.BatchSizes[4] != 1 || s.BatchSizes[8] != 1 || s.PaddedRows != 1 {
			t.Fatalf("stats %+v", s)
		}
		if time.Since(began) != 20*time.Millisecond {
			t.Fatalf("a full batch waited: %v", time.Since(began))
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if want := []int{2, 2, 4, 3, 8, 8}; !slices.Equal(obs.batches, want) {
			t.Errorf("observed batches (size, rows) %v, want %v", obs.batches, want)
		}
		slices.Sort(obs.waits)
		if want := []time.Duration{0, 4 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}; !slices.Equal(obs.waits, want) {
			t.Errorf("observed queue waits %v, want %v", obs.waits, want)
		}
	})
}

// recordingObserver keeps what a Batcher reports.
type recordingObserver struct {
	mu      sync.Mutex
	batches []int // size, rows of each batch
	waits   []time.Duration
}

func (o *recordingObserver) ObserveBatch(size, rows int, _ time.Duration) {
	o.mu.Lock()
	o.batches = append(o.batches, size, rows)
	o.mu.Unlock()
}

func (o *recordingObserver) ObserveRequest(_ int, wait, _ time.Duration) {
	o.mu.Lock()
	o.waits = append(o.waits, wait)
	o.mu.Unlock()
}

// With BATCH_DOWN, rows past their delay run in the largest allowed size
// they fill; the remainder waits for the next batch.
func TestBatcherBatchDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		b := newBatcher(t, m, online.Options{MaxDelay: time.Millisecond, BatchDown: true, NoEager: true}, predict.WithBatchSizes(2, 4, 8), predict.WithAllocator(mem))
		if err := ask(t, t.Context(), b, mem, 0, 7); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []fakedev.Seen{{Index: 0, Rows: 4}, {Index: 1, Rows: 2}, {Index: 2, Rows: 1, Padding: 1}}
		if got := m.Batches(); !slices.Equal(got, want) {
			t.Fatalf("batches %+v, want %+v", got, want)
		}
	})
}

// Eager (the default): a free session runs the largest allowed size the
// queue fills at once; a remainder that fills none waits for the delay.
func TestBatcherEager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{}
		b := newBatcher(t, m, online.Options{MaxDelay: 10 * time.Millisecond}, predict.WithBatchSizes(2, 4, 8), predict.WithAllocator(mem))
		began := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ask(t, t.Context(), b, mem, 0, 5); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		// 4 rows run at once; the 1-row remainder fills no allowed size.
		if got := m.Batches(); !slices.Equal(got, []fakedev.Seen{{Index: 0, Rows: 4}}) || time.Since(began) != 0 {
			t.Fatalf("at once: batches %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
		wg.Wait()
		if got := m.Batches(); !slices.Equal(got, []fakedev.Seen{{Index: 0, Rows: 4}, {Index: 1, Rows: 1, Padding: 1}}) {
			t.Fatalf("after the delay: batches %+v", got)
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// A queued request whose deadline passes leaves the queue at that moment,
// even while a long batch holds the only session; rows of a request that
// expires inside a running batch are computed and dropped.
func TestBatcherEvictsExpiredRequestWhileBatchRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{Block: make(chan struct{})}
		b := newBatcher(t, m, online.Options{MaxDelay: online.NoDelay, Timeout: 5 * time.Millisecond}, predict.WithBatchSize(4), predict.WithAllocator(mem))
		began := time.Now()
		var running sync.WaitGroup
		running.Go(func() {
			if err := ask(t, t.Context(), b, mem, 0, 4); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("request in the blocked batch: %v", err)
			}
		})
		synctest.Wait() // the first batch holds the session
		err := ask(t, t.Context(), b, mem, 4, 2)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) != 5*time.Millisecond {
			t.Fatalf("after %v: %v, want the default timeout at 5ms", time.Since(began), err)
		}
		cctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Millisecond, cancel)
		if err := ask(t, cctx, b, mem, 6, 1); !errors.Is(err, context.Canceled) || time.Since(began) != 6*time.Millisecond {
			t.Fatalf("cancelled request, after %v: %v", time.Since(began), err)
		}
		running.Wait()
		if s := b.Stats(); s.QueuedRows != 0 || s.Timeouts != 2 || s.Cancellations != 1 {
			t.Fatalf("stats %+v", s)
		}
		close(m.Block)
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := m.Batches(); len(got) != 1 {
			t.Fatalf("the expired rows ran: %+v", got)
		}
	})
}

// The queue bound holds under a burst: a request beyond it fails at once.
func TestBatcherOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{Block: make(chan struct{})}
		b := newBatcher(t, m, online.Options{QueueRows: 16}, predict.WithBatchSize(8), predict.WithAllocator(mem))
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ask(t, t.Context(), b, mem, 0, 8); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the first batch holds the session
		var overloads atomic.Int32
		for i := range 9 {
			wg.Go(func() {
				err := ask(t, t.Context(), b, mem, 8+8*i, 8)
				if errors.Is(err, online.ErrOverloaded) {
					overloads.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		// One batch runs, two wait in the queue: the other 7 are refused.
		if s := b.Stats(); s.QueuedRows != 16 || overloads.Load() != 7 || s.Overloads != 7 {
			t.Fatalf("queued %d rows, %d overloads (stats %d)", s.QueuedRows, overloads.Load(), s.Overloads)
		}
		close(m.Block)
		wg.Wait()
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := b.Stats(); s.Requests != 3 {
			t.Fatalf("answered %d", s.Requests)
		}
	})
}

// A failing or panicking batch fails only the requests with rows in it.
func TestBatcherFailedBatchFailsOnlyItsRequests(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := arrowtest.Allocator(t)
				m := &fakedev.Model{Fail: how == "error", FailAt: 1, Panic: how == "panic", PanicAt: 1}
				b := newBatcher(t, m, online.Options{}, predict.WithBatchSize(4), predict.WithAllocator(mem))
				if err := ask(t, t.Context(), b, mem, 0, 4); err != nil {
					t.Fatal(err)
				}
				// 6 rows: batch 1 holds 4 of them and fails; the request fails whole.
				err := ask(t, t.Context(), b, mem, 4, 6)
				want := fakedev.ErrInjected
				if how == "panic" {
					want = predict.ErrPanic
				}
				if !errors.Is(err, want) {
					t.Fatalf("request in the failing batch: %v", err)
				}
				if err := ask(t, t.Context(), b, mem, 10, 3); err != nil {
					t.Fatalf("the batcher stopped serving: %v", err)
				}
				if err := b.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				m.AssertLifecycle(t, 1)
				if s := b.Stats(); s.Failures != 1 || s.Requests != 2 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

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
		for err := range errs {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("request at a Close past its deadline: %v", err)
			}
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
