package predict_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/predict"
)

// A run cancelled while it bisects a failing batch, after a row was found
// to fail alone, releases that row: nothing is set aside, no buffer is
// held (the allocator ends at zero), the session shuts down once.
func TestCancelDuringBisection(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Batch 0 fails on row 5; bisection finds it alone, then runs rows
	// 8 to 15, where row 12 fails too and the run is cancelled.
	m := &fakedev.Model{Poison: func(id int64) bool {
		if id == 12 {
			cancel()
		}
		return id == 5 || id == 12
	}}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(16), predict.WithAllocator(mem),
		predict.WithSetAside(func(arrow.RecordBatch, error) { t.Error("a row was set aside after the run was cancelled") }))
	ys, err := drain(t, p.Predict(ctx, f.ds))
	if len(ys) != 0 || err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled run: %d predictions, %v", len(ys), err)
	}
	m.AssertLifecycle(t, 1)
	f.release()
	mem.AssertSize(t, 0)
}
