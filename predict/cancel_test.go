package predict_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/predict"
)

func TestIteratorBreakShutsDownBeforeLoopEnds(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 7, 7, 7)
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	n := 0
	for _, err := range p.All(t.Context(), f.ds) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Live.Load() != 1 {
			t.Fatal("no live session inside the loop")
		}
		if n++; n == 2 {
			break
		}
	}
	if m.Live.Load() != 0 {
		t.Fatal("session still live after break")
	}
	m.AssertLifecycle(t, 1)
	if m.Predicts.Load() != 2 {
		t.Fatalf("%d device steps after a break at the second batch", m.Predicts.Load())
	}
}

func TestIteratorPanicInBodyShutsDown(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 9)
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	func() {
		defer func() {
			if r := recover(); r != "body" {
				t.Fatalf("recovered %v, want the body's panic", r)
			}
		}()
		for range p.All(t.Context(), f.ds) {
			panic("body")
		}
	}()
	m.AssertLifecycle(t, 1)
}

func TestCancelWhileConsumerIsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 40)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		ch := p.Predict(ctx, f.ds)
		for range 2 {
			(<-ch).Record.Release()
		}
		synctest.Wait() // the run has computed batch 2 and waits to send it
		if got := m.Predicts.Load(); got != 3 {
			t.Fatalf("%d device steps before the cancel, want 3", got)
		}
		cancel()
		for r := range ch {
			t.Fatalf("result after cancel: %+v", r)
		}
		// The channel is closed: the device must be down already.
		m.AssertLifecycle(t, 1)
		if m.Predicts.Load() != 3 {
			t.Fatalf("device ran %d steps, want no more after the cancel", m.Predicts.Load())
		}
	})
}

func TestCancelWhileDeviceIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 40)
		m := &fakedev.Model{Block: make(chan struct{})}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		ch := p.Predict(ctx, f.ds)
		synctest.Wait() // blocked inside the first Predict
		if m.Live.Load() != 1 || m.Predicts.Load() != 1 {
			t.Fatalf("live %d, predicts %d", m.Live.Load(), m.Predicts.Load())
		}
		cancel()
		if _, ok := <-ch; ok {
			t.Fatal("result after cancel")
		}
		m.AssertLifecycle(t, 1)
	})
}

func TestCancelIteratorForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 40)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var errs []error
		n := 0
		for _, err := range p.All(ctx, f.ds) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if n++; n == 3 {
				cancel()
			}
		}
		if n != 3 || len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Fatalf("%d batches, errors %v; want 3 and context.Canceled", n, errs)
		}
		m.AssertLifecycle(t, 1)
	})
}

func TestCancelledBeforeStart(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 5)
	m := &fakedev.Model{}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := drain(t, fakedev.NewPredictor(t, m, predict.WithAllocator(mem)).Predict(ctx, f.ds)); err != nil {
		t.Fatalf("err %v: a cancelled consumer is sent nothing", err)
	}
	m.AssertLifecycle(t, 0)
}

func TestStats(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 3, 8)
	var got []predict.Stats
	p := fakedev.NewPredictor(t, &fakedev.Model{}, predict.WithBatchSize(4), predict.WithAllocator(mem),
		predict.WithStats(func(s predict.Stats) { got = append(got, s) }))
	if _, err := drain(t, p.Predict(t.Context(), f.ds)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("stats reported %d times", len(got))
	}
	s := got[0]
	if s.Rows != 11 || s.Batches != 3 || s.PaddedRows != 1 || s.PaddingWaste() != 1.0/12 || s.Wall <= 0 {
		t.Fatalf("stats %+v", s)
	}
}

// The times in the statistics say where a run waited: the input takes 7s
// a batch, the device 3s and the consumer 5s, on synctest's clock, and are
// reported to WithStats and in the log's summary, with one session group
// and with two.
func TestStatsTimes(t *testing.T) {
	for _, groups := range []int{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			f := newFixture(t, mem, 4, 4, 4)
			slowInput := dataset.New(arrowtest.IDSchema, func(yield func(arrow.RecordBatch, error) bool) {
				for rec, err := range f.ds.Records() {
					time.Sleep(7 * time.Second)
					if !yield(rec, err) {
						return
					}
				}
			})
			var logged strings.Builder
			logger := slog.New(slog.NewTextHandler(&logged, nil))
			var got predict.Stats
			model := &fakedev.Model{Takes: func(int) time.Duration { return 3 * time.Second }}
			for _, opt := range []predict.Option{predict.WithStats(func(s predict.Stats) { got = s }), predict.WithLogger(logger)} {
				p := fakedev.NewPredictor(t, model, predict.WithBatchSize(4), predict.WithGroups(groups), predict.WithAllocator(mem), opt)
				for _, err := range p.All(t.Context(), slowInput) {
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(5 * time.Second)
				}
			}
			if got.DeviceTime != 9*time.Second || got.ConsumerWait != 15*time.Second {
				t.Fatalf("%d group(s): device %v, consumer %v; want 9s, 15s", groups, got.DeviceTime, got.ConsumerWait)
			}
			// With a second group the input is read ahead, while the
			// consumer waits: it waits less for the input than it takes.
			if got.InputWait < 7*time.Second || got.InputWait > 21*time.Second || (groups == 1 && got.InputWait != 21*time.Second) {
				t.Fatalf("%d group(s): input %v, want 21s with one group, 7s..21s with two", groups, got.InputWait)
			}
			if !strings.Contains(logged.String(), "stats.device=9s stats.consumer_wait=15s") {
				t.Fatalf("%d group(s): the log's summary has no times:\n%s", groups, logged.String())
			}
		})
	}
}

// Steady-state allocations per batch must not grow with the row count: the
// run keeps no per-row or per-batch state beyond the batch in flight.
func TestAllocationsPerBatchDoNotGrow(t *testing.T) {
	mem := memory.NewGoAllocator()
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(32), predict.WithAllocator(mem), predict.WithPassthrough("id"))
	perBatch := func(batches int) float64 {
		f := newFixture(t, mem, 32*batches)
		allocs := testing.AllocsPerRun(3, func() {
			for _, err := range p.All(t.Context(), f.ds) {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		return allocs / float64(batches)
	}
	small, large := perBatch(20), perBatch(400)
	if large > small+0.5 {
		t.Fatalf("allocations per batch grow with rows: %.2f at 20 batches, %.2f at 400", small, large)
	}
}
