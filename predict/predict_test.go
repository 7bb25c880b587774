package predict_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/runner"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
)

// fixture is a dataset of ids 0..total-1 in records of the given sizes.
type fixture struct {
	recs  []arrow.RecordBatch
	ds    *dataset.Dataset
	total int
}

func newFixture(t *testing.T, mem memory.Allocator, sizes ...int) *fixture {
	t.Helper()
	recs := arrowtest.Chunked(mem, sizes)
	total := 0
	for _, n := range sizes {
		total += n
	}
	f := &fixture{recs: recs, ds: dataset.FromRecords(arrowtest.IDSchema, recs...), total: total}
	t.Cleanup(f.release)
	return f
}

// release releases the records once; the dataset is unusable afterwards.
func (f *fixture) release() {
	arrowtest.Release(f.recs)
	f.recs = nil
}

// drain reads every result, releasing records, and returns the "y" values
// and the final error.
func drain(t *testing.T, ch <-chan predict.Result) (ys []int64, err error) {
	t.Helper()
	for r := range ch {
		if r.Err != nil {
			if err != nil {
				t.Fatalf("second error result: %v after %v", r.Err, err)
			}
			err = r.Err
			continue
		}
		if err != nil {
			t.Fatal("result after the error result")
		}
		ys = append(ys, arrowtest.Int64s(t, "y", r.Record)...)
		r.Record.Release()
	}
	return ys, err
}

func TestExactlyOnceInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 60 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		size := 1 + rng.IntN(9)
		sizes := make([]int, rng.IntN(8))
		for i := range sizes {
			sizes[i] = rng.IntN(3*size + 1)
		}
		f := newFixture(t, mem, sizes...)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(size), predict.WithAllocator(mem))

		ys, err := drain(t, p.Predict(t.Context(), f.ds))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ys, fakedev.Doubled(f.total)) {
			t.Fatalf("trial %d: sizes %v batch %d: got %v", trial, sizes, size, ys)
		}
		m.AssertLifecycle(t, 1)
		batches := m.Batches()
		if want := (f.total + size - 1) / size; len(batches) != want {
			t.Fatalf("trial %d: %d device steps, want %d", trial, len(batches), want)
		}
		for i, b := range batches {
			last := i == len(batches)-1
			if b.Index != i || b.Rows+b.Padding != size || (!last && b.Padding != 0) {
				t.Fatalf("trial %d: step %d saw %+v", trial, i, b)
			}
		}
		f.release()
		mem.AssertSize(t, 0)
	}
}

func TestSessionConfig(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 10)
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	if _, err := drain(t, p.Predict(t.Context(), f.ds)); err != nil {
		t.Fatal(err)
	}
	cfg := m.Configs()[0]
	if cfg.BatchSize != 4 || cfg.Replicas != 1 || cfg.Allocator != mem {
		t.Fatalf("config %+v", cfg)
	}
	if want, _ := pad.Schema(arrowtest.IDSchema); !cfg.Schema.Equal(want) {
		t.Fatalf("session schema %s, want %s", cfg.Schema, want)
	}
	if got := m.Batches()[2]; got.Rows != 2 || got.Padding != 2 {
		t.Fatalf("last batch %+v, want 2 rows and 2 padding", got)
	}
}

func TestPassthroughAndKeepPadding(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 5)
	p := fakedev.NewPredictor(t, &fakedev.Model{}, predict.WithBatchSize(4), predict.WithAllocator(mem), predict.WithPassthrough("id"))
	var ids []int64
	for rec, err := range p.All(t.Context(), f.ds) {
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Schema().Field(0).Name + "," + rec.Schema().Field(1).Name; got != "id,y" || rec.NumCols() != 2 {
			t.Fatalf("columns %s", rec.Schema())
		}
		ids = append(ids, arrowtest.Int64s(t, "id", rec)...)
	}
	if !slices.Equal(ids, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("passthrough ids %v", ids)
	}

	raw := fakedev.NewPredictor(t, &fakedev.Model{}, predict.WithBatchSize(4), predict.WithAllocator(mem), predict.WithPadding(true))
	var ys []int64
	var flags []bool
	for rec, err := range raw.All(t.Context(), f.ds) {
		if err != nil {
			t.Fatal(err)
		}
		ys = append(ys, arrowtest.Int64s(t, "y", rec)...)
		col := rec.Column(rec.Schema().FieldIndices(pad.Column)[0]).(*array.Boolean)
		for i := range col.Len() {
			flags = append(flags, col.Value(i))
		}
	}
	if !slices.Equal(ys, []int64{0, 2, 4, 6, 8, -1, -1, -1}) || !slices.Equal(flags, []bool{false, false, false, false, false, true, true, true}) {
		t.Fatalf("raw output y %v, is_padding %v", ys, flags)
	}
}

func TestEmptyDataset(t *testing.T) {
	mem := arrowtest.Allocator(t)
	for _, sizes := range [][]int{nil, {0, 0}} {
		f := newFixture(t, mem, sizes...)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem))
		ys, err := drain(t, p.Predict(t.Context(), f.ds))
		if err != nil || len(ys) != 0 {
			t.Fatalf("empty: ys %v, err %v", ys, err)
		}
		if m.Starts.Load() != m.Shutdowns.Load() || m.Predicts.Load() != 0 {
			t.Fatalf("empty: starts %d, shutdowns %d, predicts %d", m.Starts.Load(), m.Shutdowns.Load(), m.Predicts.Load())
		}
	}
}

func TestFailuresShutDownOnceAndSayWhere(t *testing.T) {
	tests := []struct {
		name  string
		model *fakedev.Model
		is    error
		say   []string
		rows  int // predictions delivered before the failure
	}{
		{"model error", &fakedev.Model{Fail: true, FailAt: 2}, fakedev.ErrInjected, []string{"batch 2"}, 8},
		{"model panic", &fakedev.Model{Panic: true, PanicAt: 1}, predict.ErrPanic, []string{"batch 1", "panic at batch 1"}, 4},
		{"wrong row count", &fakedev.Model{Short: true, ShortAt: 3}, predict.ErrRowCount, []string{"batch 3", "got 3", "want 4"}, 12},
		{"shutdown error", &fakedev.Model{ShutdownErr: fakedev.ErrInjected}, fakedev.ErrInjected, []string{"shutdown"}, 14},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			f := newFixture(t, mem, 3, 11)
			p := fakedev.NewPredictor(t, tc.model, predict.WithBatchSize(4), predict.WithAllocator(mem))
			ys, err := drain(t, p.Predict(t.Context(), f.ds))
			if !errors.Is(err, tc.is) {
				t.Fatalf("err %v, want %v", err, tc.is)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err %q does not say %q", err, s)
				}
			}
			if !slices.Equal(ys, fakedev.Doubled(tc.rows)) {
				t.Fatalf("delivered %v before the failure, want %d rows", ys, tc.rows)
			}
			tc.model.AssertLifecycle(t, 1)

			// The iterator form reports the same failure.
			tc.model.Starts.Store(0)
			tc.model.Shutdowns.Store(0)
			var last error
			for _, err := range p.All(t.Context(), f.ds) {
				last = err
			}
			if !errors.Is(last, tc.is) {
				t.Fatalf("All: err %v, want %v", last, tc.is)
			}
			tc.model.AssertLifecycle(t, 1)
		})
	}
}

func TestStartErrorNoSession(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 5)
	m := &fakedev.Model{StartErr: fakedev.ErrInjected}
	_, err := drain(t, fakedev.NewPredictor(t, m, predict.WithAllocator(mem)).Predict(t.Context(), f.ds))
	if !errors.Is(err, fakedev.ErrInjected) || !strings.Contains(err.Error(), "start session") {
		t.Fatalf("err %v", err)
	}
	m.AssertLifecycle(t, 0)
}

func TestHooks(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 10)
	var events []string
	hook := predict.Hook{
		Before: func(_ context.Context, b device.Batch) error {
			events = append(events, fmt.Sprintf("before %d %d+%d/%d", b.Index, b.Rows(), b.Padding, b.Record.NumRows()))
			return nil
		},
		After: func(_ context.Context, b device.Batch, preds arrow.RecordBatch) error {
			events = append(events, fmt.Sprintf("after %d %d", b.Index, preds.NumRows()))
			if b.Index == 1 {
				return fakedev.ErrInjected
			}
			return nil
		},
	}
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithAllocator(mem), predict.WithHooks(hook))
	ys, err := drain(t, p.Predict(t.Context(), f.ds))
	if !errors.Is(err, fakedev.ErrInjected) || !strings.Contains(err.Error(), "batch 1: after hook") {
		t.Fatalf("err %v", err)
	}
	want := []string{"before 0 4+0/4", "after 0 4", "before 1 4+0/4", "after 1 4"}
	if !slices.Equal(events, want) || len(ys) != 4 {
		t.Fatalf("events %v, ys %v", events, ys)
	}
	m.AssertLifecycle(t, 1)
}

func TestBadInput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	if _, err := predict.New(&fakedev.Model{}, predict.WithBatchSize(0)); !errors.Is(err, predict.ErrBatchSize) {
		t.Fatalf("batch size 0: err %v", err)
	}

	withFlag := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, pad.Field()}, nil)
	m := &fakedev.Model{}
	_, err := drain(t, fakedev.NewPredictor(t, m, predict.WithAllocator(mem)).Predict(t.Context(), dataset.FromRecords(withFlag)))
	if !errors.Is(err, pad.ErrColumnExists) {
		t.Fatalf("is_padding in input: err %v", err)
	}
	m.AssertLifecycle(t, 0)

	f := newFixture(t, mem, 3)
	_, err = drain(t, fakedev.NewPredictor(t, m, predict.WithAllocator(mem), predict.WithPassthrough("key")).Predict(t.Context(), f.ds))
	if !errors.Is(err, predict.ErrColumn) || !strings.Contains(err.Error(), `"key"`) {
		t.Fatalf("missing passthrough: err %v", err)
	}
	_, err = drain(t, fakedev.NewPredictor(t, m, predict.WithAllocator(mem), predict.WithPassthrough("id", "id")).Predict(t.Context(), f.ds))
	if !errors.Is(err, predict.ErrColumn) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate passthrough: err %v", err)
	}

	other := arrowtest.IDs(mem, 3, 2)
	defer other.Release()
	changed := arrowtest.FloatID(mem)
	defer changed.Release()
	m = &fakedev.Model{}
	ds := dataset.FromRecords(arrowtest.IDSchema, f.recs[0], other, changed)
	ys, err := drain(t, fakedev.NewPredictor(t, m, predict.WithBatchSize(2), predict.WithAllocator(mem)).Predict(t.Context(), ds))
	if !errors.Is(err, dataset.ErrSchemaMismatch) || !strings.Contains(err.Error(), "record 2") {
		t.Fatalf("schema change: err %v", err)
	}
	if !slices.Equal(ys, []int64{0, 2, 4, 6}) {
		t.Fatalf("schema change: delivered %v", ys)
	}
	m.AssertLifecycle(t, 1)
}

// The settings package online reads hand out copies: a caller that
// changes the batch sizes it got does not change the Predictor's.
func TestSettingsAreCopies(t *testing.T) {
	p := fakedev.NewPredictor(t, &fakedev.Model{}, predict.WithBatchSizes(2, 8))
	s := runner.Of(p)
	s.BatchSizes[0] = 1000
	if got := runner.Of(p).BatchSizes; got[0] != 2 {
		t.Fatalf("the Predictor's batch sizes changed through Settings: %v", got)
	}
}
