package predict_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/predict"
)

// Exactly once, in order, over random dataset sizes, replica counts,
// allowed batch sizes and prefetch depths.
func TestReplicasPrefetchBucketsExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 120 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		replicas, sessions := 1+rng.IntN(4), 1+rng.IntN(3)
		size := replicas * (1 + rng.IntN(4))
		opts := []predict.Option{predict.WithBatchSize(size), predict.WithReplicas(replicas), predict.WithGroups(sessions),
			predict.WithPrefetch(rng.IntN(4)), predict.WithAllocator(mem)}
		var buckets []int
		if rng.IntN(2) == 0 {
			for s := replicas; s < size; s += replicas * (1 + rng.IntN(2)) {
				buckets = append(buckets, s)
			}
			buckets = append(buckets, size)
			opts = append(opts, predict.WithBatchSizes(buckets...))
		}
		sizes := make([]int, rng.IntN(6))
		for i := range sizes {
			sizes[i] = rng.IntN(3*size + 1)
		}
		f := newFixture(t, mem, sizes...)
		m := &fakedev.Model{}
		var stats predict.Stats
		p := fakedev.NewPredictor(t, m, append(opts, predict.WithStats(func(s predict.Stats) { stats = s }))...)

		ys, err := drain(t, p.Predict(t.Context(), f.ds))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !slices.Equal(ys, fakedev.Doubled(f.total)) {
			t.Fatalf("trial %d: sizes %v, batch %d, replicas %d, sessions %d, buckets %v: got %v", trial, sizes, size, replicas, sessions, buckets, ys)
		}
		m.AssertLifecycle(t, int32(replicas*sessions))
		steps := (f.total + size - 1) / size
		if got := int(m.Predicts.Load()); got != steps*replicas {
			t.Fatalf("trial %d: %d Predict calls, want %d batches × %d replicas", trial, got, steps, replicas)
		}
		tail := 0
		if f.total%size != 0 {
			tail = f.total % size
		}
		wantPadded := 0
		if tail > 0 {
			padTo := size
			for _, b := range buckets {
				if b >= tail {
					padTo = b
					break
				}
			}
			wantPadded = padTo - tail
		}
		if stats.Rows != int64(f.total) || stats.Batches != int64(steps) || stats.PaddedRows != int64(wantPadded) {
			t.Fatalf("trial %d: stats %+v, want %d rows, %d batches, %d padded", trial, stats, f.total, steps, wantPadded)
		}
		f.release()
		mem.AssertSize(t, 0)
	}
}

func TestReplicaSessions(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 9) // batch 8 over 2 replicas: the tail batch is 1 row + 7 padding
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(8), predict.WithReplicas(2), predict.WithAllocator(mem))
	if _, err := drain(t, p.Predict(t.Context(), f.ds)); err != nil {
		t.Fatal(err)
	}
	var replicasSeen []int
	for _, c := range m.Configs() {
		if c.BatchSize != 4 || c.Replicas != 2 || !slices.Equal(c.BatchSizes, []int{4}) {
			t.Fatalf("config %+v: want per-replica batch size 4 of 2 replicas", c)
		}
		replicasSeen = append(replicasSeen, c.Replica)
	}
	slices.Sort(replicasSeen)
	if !slices.Equal(replicasSeen, []int{0, 1}) {
		t.Fatalf("replica indices %v", replicasSeen)
	}
	// The tail: replica 0 gets 1 real row and 3 padding, replica 1 only
	// padding, and still runs (static shapes).
	var tail []fakedev.Seen
	for _, s := range m.Batches() {
		if s.Index == 1 {
			tail = append(tail, s)
		}
	}
	slices.SortFunc(tail, func(a, b fakedev.Seen) int { return a.Replica - b.Replica })
	if want := []fakedev.Seen{{Index: 1, Rows: 1, Padding: 3, Replica: 0}, {Index: 1, Rows: 0, Padding: 4, Replica: 1}}; !slices.Equal(tail, want) {
		t.Fatalf("tail steps %+v, want %+v", tail, want)
	}
}

func TestBucketedPadding(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 37)
	m := &fakedev.Model{}
	var stats predict.Stats
	p := fakedev.NewPredictor(t, m, predict.WithBatchSizes(4, 8, 16), predict.WithAllocator(mem), predict.WithStats(func(s predict.Stats) { stats = s }))
	ys, err := drain(t, p.Predict(t.Context(), f.ds))
	if err != nil || !slices.Equal(ys, fakedev.Doubled(37)) {
		t.Fatalf("ys %v, err %v", ys, err)
	}
	seen := m.Batches()
	if first := seen[0]; first.Rows != 16 || first.Padding != 0 {
		t.Fatalf("first batch %+v: want the largest allowed size, 16 rows", first)
	}
	if last := seen[len(seen)-1]; last.Rows != 5 || last.Padding != 3 {
		t.Fatalf("tail %+v: want 5 rows padded to 8", last)
	}
	if !slices.Equal(m.Configs()[0].BatchSizes, []int{4, 8, 16}) {
		t.Fatalf("session told sizes %v", m.Configs()[0].BatchSizes)
	}
	if stats.PaddedRows != 3 || stats.PaddingWaste() != 3.0/40 {
		t.Fatalf("stats %+v", stats)
	}
}

func TestReplicaFailures(t *testing.T) {
	tests := []struct {
		name  string
		model *fakedev.Model
		is    error
		say   string
	}{
		// Replica 1 fails while replica 0 is blocked: the failure cancels it.
		{"error", &fakedev.Model{Fail: true, FailAt: 1, Replica: 1, Block: make(chan struct{})}, fakedev.ErrInjected, "batch 1: model: replica 1 of 3"},
		{"panic", &fakedev.Model{Panic: true, PanicAt: 0, Replica: 2}, predict.ErrPanic, "batch 0: model: replica 2 of 3"},
		{"row count", &fakedev.Model{Short: true, ShortAt: 2, Replica: 0}, predict.ErrRowCount, "batch 2: model: replica 0 of 3: predict: model returned the wrong number of rows: got 1, want 2"},
		{"start", &fakedev.Model{StartErr: fakedev.ErrInjected, StartErrReplica: 2}, fakedev.ErrInjected, "start session: replica 2 of 3"},
		{"shutdown", &fakedev.Model{ShutdownErr: fakedev.ErrInjected}, fakedev.ErrInjected, "shutdown session: replica 2 of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			f := newFixture(t, mem, 20)
			if tc.model.Block != nil && tc.model.FailAt > 0 {
				close(tc.model.Block) // let batches before the failure through
				tc.model.Block = nil
			}
			p := fakedev.NewPredictor(t, tc.model, predict.WithBatchSize(6), predict.WithReplicas(3), predict.WithPrefetch(2), predict.WithAllocator(mem))
			_, err := drain(t, p.Predict(t.Context(), f.ds))
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("err %v, want %v saying %q", err, tc.is, tc.say)
			}
			if s, d := tc.model.Starts.Load(), tc.model.Shutdowns.Load(); s != d || tc.model.Live.Load() != 0 {
				t.Fatalf("starts %d, shutdowns %d", s, d)
			}
			if tc.name != "start" && tc.model.Starts.Load() != 3 {
				t.Fatalf("%d sessions started, want 3", tc.model.Starts.Load())
			}
		})
	}
}

// A failing replica cancels a sibling that is still busy on the same batch.
func TestReplicaFailureCancelsSiblings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 20)
		m := &fakedev.Model{Fail: true, FailAt: 0, Replica: 1, Block: make(chan struct{})}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithReplicas(2), predict.WithAllocator(mem))
		_, err := drain(t, p.Predict(t.Context(), f.ds))
		if !errors.Is(err, fakedev.ErrInjected) {
			t.Fatalf("err %v", err)
		}
		if errors.Is(err, context.Canceled) {
			t.Fatalf("err %v: the sibling's cancellation must not mask the cause", err)
		}
		m.AssertLifecycle(t, 2)
	})
}

func TestCancelWithReplicasAndPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 200)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithReplicas(2), predict.WithPrefetch(3), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		ch := p.Predict(ctx, f.ds)
		(<-ch).Record.Release()
		synctest.Wait() // the input side has filled the prefetch buffer
		cancel()
		for range ch {
			t.Fatal("result after cancel")
		}
		m.AssertLifecycle(t, 2)
	})
}

// An input failure with prefetch stops the device side too, and the
// batches already read ahead are released.
func TestPrefetchInputError(t *testing.T) {
	mem := arrowtest.Allocator(t)
	good := arrowtest.Chunked(mem, []int{10, 10})
	defer arrowtest.Release(good)
	bad := arrowtest.FloatID(mem)
	defer bad.Release()
	ds := dataset.FromRecords(arrowtest.IDSchema, good[0], good[1], bad)
	m := &fakedev.Model{}
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithPrefetch(8), predict.WithAllocator(mem))
	ys, err := drain(t, p.Predict(t.Context(), ds))
	if !errors.Is(err, dataset.ErrSchemaMismatch) || !strings.Contains(err.Error(), "batch 5: input: record 2") {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(ys, fakedev.Doubled(20)) {
		t.Fatalf("delivered %v, want all 20 rows before the bad record", ys)
	}
	m.AssertLifecycle(t, 1)
}

func TestReplicaAndBucketOptionErrors(t *testing.T) {
	cases := []struct {
		opts []predict.Option
		is   error
		say  string
	}{
		{[]predict.Option{predict.WithReplicas(0)}, predict.ErrReplicas, "0 replicas"},
		{[]predict.Option{predict.WithReplicas(-2)}, predict.ErrReplicas, "-2 replicas"},
		{[]predict.Option{predict.WithBatchSize(10), predict.WithReplicas(4)}, predict.ErrReplicas, "batch size 10 does not divide by 4 replicas"},
		{[]predict.Option{predict.WithBatchSizes()}, predict.ErrBatchSizes, "empty"},
		{[]predict.Option{predict.WithBatchSizes(8, 4, 16)}, predict.ErrBatchSizes, "not strictly ascending"},
		{[]predict.Option{predict.WithBatchSize(32), predict.WithBatchSizes(8, 16)}, predict.ErrBatchSizes, "largest size 16, batch size 32"},
		{[]predict.Option{predict.WithBatchSizes(3, 8), predict.WithReplicas(2)}, predict.ErrBatchSizes, "size 3 does not divide by 2 replicas"},
	}
	for _, c := range cases {
		_, err := predict.New(&fakedev.Model{}, c.opts...)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.say) {
			t.Errorf("err %v, want %v saying %q", err, c.is, c.say)
		}
	}
}

// Poison rows: a batch the device fails because of some rows is run again
// in halves until those rows are found; they are set aside and every other
// row is predicted, in order.
func TestSetAsidePoisonRows(t *testing.T) {
	poison := map[int64]bool{5: true, 37: true, 38: true, 99: true}
	for _, replicas := range []int{1, 2} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		f := newFixture(t, mem, 30, 70)
		m := &fakedev.Model{Poison: func(id int64) bool { return poison[id] }}
		var aside []int64
		var st predict.Stats
		p := fakedev.NewPredictor(t, m, predict.WithBatchSizes(4, 16), predict.WithReplicas(replicas), predict.WithAllocator(mem),
			predict.WithStats(func(s predict.Stats) { st = s }),
			predict.WithSetAside(func(row arrow.RecordBatch, err error) {
				if row.NumRows() != 1 || !errors.Is(err, fakedev.ErrInjected) {
					t.Errorf("set aside %d rows: %v", row.NumRows(), err)
				}
				aside = append(aside, arrowtest.Int64s(t, "id", row)...)
			}))
		ys, err := drain(t, p.Predict(t.Context(), f.ds))
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for id := range int64(100) {
			if !poison[id] {
				want = append(want, 2*id)
			}
		}
		if !slices.Equal(ys, want) || !slices.Equal(aside, []int64{5, 37, 38, 99}) || st.Rows != 96 {
			t.Fatalf("replicas %d: %d predictions, set aside %v, stats rows %d", replicas, len(ys), aside, st.Rows)
		}
		m.AssertLifecycle(t, int32(replicas))
		f.release()
		mem.AssertSize(t, 0)
	}
	// The padding of a batch that was bisected still counts: the device
	// ran it (4 rows and 12 padding, row 99 set aside).
	{
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 100)
		var st predict.Stats
		p := fakedev.NewPredictor(t, &fakedev.Model{Poison: func(id int64) bool { return id == 99 }}, predict.WithBatchSize(16),
			predict.WithAllocator(mem), predict.WithStats(func(s predict.Stats) { st = s }),
			predict.WithSetAside(func(arrow.RecordBatch, error) {}))
		if _, err := drain(t, p.Predict(t.Context(), f.ds)); err != nil {
			t.Fatal(err)
		}
		if st.Rows != 99 || st.PaddedRows != 12 || st.Batches != 7 {
			t.Fatalf("stats after a bisected padded batch: %+v", st)
		}
		f.release()
	}
	// A batch whose every row fails alone: the device is failing; the run ends.
	for _, named := range []bool{false, true} {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 40)
		m := &fakedev.Model{Poison: func(id int64) bool { return id >= 16 && id < 32 }, NamePoison: named}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(16), predict.WithAllocator(mem),
			predict.WithSetAside(func(arrow.RecordBatch, error) { t.Error("a row was set aside") }))
		// A named row is named by its run's row number; else the batch.
		where := map[bool]string{false: "batch 1", true: "row 16"}[named]
		if _, err := drain(t, p.Predict(t.Context(), f.ds)); !errors.Is(err, fakedev.ErrInjected) || !strings.Contains(err.Error(), where) {
			t.Fatalf("every row failing (named %v): %v", named, err)
		}
		f.release()
	}
}

// A row error that names its row sends bisection straight to that row:
// a batch of 64 with one bad row runs three times (the batch, the rows
// before, the rows after), not down a halving to the row, and the row
// set aside carries its own error, as row 0 of its one-row record.
func TestSetAsideNamedRow(t *testing.T) {
	mem := arrowtest.Allocator(t)
	f := newFixture(t, mem, 64)
	m := &fakedev.Model{Poison: func(id int64) bool { return id == 40 }, NamePoison: true}
	var aside []int64
	p := fakedev.NewPredictor(t, m, predict.WithBatchSize(64), predict.WithAllocator(mem),
		predict.WithSetAside(func(row arrow.RecordBatch, err error) {
			var re *device.RowError
			if !errors.As(err, &re) || re.Row != 0 || re.Column != "id" || !errors.Is(err, fakedev.ErrInjected) {
				t.Errorf("set aside with %v", err)
			}
			aside = append(aside, arrowtest.Int64s(t, "id", row)...)
		}))
	ys, err := drain(t, p.Predict(t.Context(), f.ds))
	if err != nil {
		t.Fatal(err)
	}
	if len(ys) != 63 || !slices.Equal(aside, []int64{40}) || m.Predicts.Load() != 3 {
		t.Fatalf("%d predictions, set aside %v, %d device runs; want 63, [40], 3", len(ys), aside, m.Predicts.Load())
	}
	f.release()
}

// With several session groups taking whole batches, a failure arrives in
// order, after the batches before it, and every session shuts down once;
// cancelling stops every group.
func TestSessionsFailInOrderAndCancel(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			f := newFixture(t, mem, 100)
			m := &fakedev.Model{Fail: how == "error", FailAt: 5, Panic: how == "panic", PanicAt: 5}
			p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithGroups(3), predict.WithPrefetch(2), predict.WithAllocator(mem))
			ys, err := drain(t, p.Predict(t.Context(), f.ds))
			want := fakedev.ErrInjected
			if how == "panic" {
				want = predict.ErrPanic
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), "batch 5") || !slices.Equal(ys, fakedev.Doubled(20)) {
				t.Fatalf("%d rows before %v", len(ys), err)
			}
			m.AssertLifecycle(t, 3)
		})
	}
	synctest.Test(t, func(t *testing.T) {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, 200)
		m := &fakedev.Model{}
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(4), predict.WithGroups(2), predict.WithAllocator(mem))
		ctx, cancel := context.WithCancel(t.Context())
		ch := p.Predict(ctx, f.ds)
		(<-ch).Record.Release()
		synctest.Wait()
		cancel()
		for r := range ch {
			r.Record.Release() // at most what was on its way
		}
		m.AssertLifecycle(t, 2)
		// The iterator form, left early.
		n := 0
		for _, err := range p.All(t.Context(), f.ds) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 3 {
				break
			}
		}
		m.AssertLifecycle(t, 4)
	})
}

// A model that takes short batches (device.ShortBatcher) gets the final
// batch with no padding rows, or as few as make it divide among the
// replicas; the others are full.
func TestShortBatches(t *testing.T) {
	for _, c := range []struct{ rows, replicas, padding int }{{100, 1, 0}, {100, 2, 0}, {99, 2, 1}, {97, 4, 3}} {
		mem := arrowtest.Allocator(t)
		f := newFixture(t, mem, c.rows)
		m := &fakedev.Model{TakesShort: true}
		var st predict.Stats
		p := fakedev.NewPredictor(t, m, predict.WithBatchSize(16), predict.WithReplicas(c.replicas), predict.WithAllocator(mem),
			predict.WithStats(func(s predict.Stats) { st = s }))
		ys, err := drain(t, p.Predict(t.Context(), f.ds))
		if err != nil {
			t.Fatal(err)
		}
		if len(ys) != c.rows || st.PaddedRows != int64(c.padding) {
			t.Errorf("%d rows on %d replicas: %d predictions, %d padding rows; want %d", c.rows, c.replicas, len(ys), st.PaddedRows, c.padding)
		}
		f.release()
		mem.AssertSize(t, 0)
	}
}
