package online_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
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

// QueueRequests bounds the requests queued, whatever their rows (Triton's
// max_queue_size): of ten 1-row requests behind a running batch, three
// wait and seven are refused, though 3 rows are far under QueueRows.
func TestBatcherQueueRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		m := &fakedev.Model{Block: make(chan struct{})}
		b := newBatcher(t, m, online.Options{QueueRequests: 3, MaxDelay: online.NoDelay}, predict.WithBatchSize(8), predict.WithAllocator(mem))
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ask(t, t.Context(), b, mem, 0, 1); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the first batch holds the session
		var overloads atomic.Int32
		for i := range 10 {
			wg.Go(func() {
				err := ask(t, t.Context(), b, mem, 1+i, 1)
				if errors.Is(err, online.ErrOverloaded) {
					overloads.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		if s := b.Stats(); s.QueuedRows != 3 || overloads.Load() != 7 {
			t.Fatalf("queued %d rows, %d overloads", s.QueuedRows, overloads.Load())
		}
		close(m.Block)
		wg.Wait()
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
