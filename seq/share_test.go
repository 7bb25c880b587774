package seq_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/seq"
)

// gated numbers its sessions from 0 and counts each one's runs. Session
// 0's first run waits for hold, after closing entered; session 1 fails
// every run after its first when failHelp is set.
type gated struct {
	*seqtest.Engine
	sessions atomic.Int64
	runs     [2]atomic.Int64
	entered  chan struct{}
	hold     chan struct{}
	failHelp bool
}

type gatedSession struct {
	seq.EngineSession
	g  *gated
	id int64
}

func (g *gated) Start(ctx context.Context, cfg seq.EngineConfig) (seq.EngineSession, error) {
	es, err := g.Engine.Start(ctx, cfg)
	return &gatedSession{EngineSession: es, g: g, id: g.sessions.Add(1) - 1}, err
}

var errHelp = errors.New("a helper's run failed")

func (s *gatedSession) Run(ctx context.Context, b *seq.Batch) ([][]float32, error) {
	n := s.g.runs[s.id].Add(1)
	if s.id == 0 && n == 1 {
		close(s.g.entered)
		<-s.g.hold
	}
	if s.id == 1 && n > 1 && s.g.failHelp {
		return nil, errHelp
	}
	return s.EngineSession.Run(ctx, b)
}

// twoWindows starts two sessions of a model over g and runs a long
// window on session 0, held in its first sub-batch, and a one-sub-batch
// window on session 1. It returns session 1's result and error, then
// session 0's once hold is closed, and the long window's sub-batches.
func twoWindows(t *testing.T, mem memory.Allocator, g *gated, long, short [][]int64) (res [2]arrow.RecordBatch, errs [2]error, subBatches int64) {
	t.Helper()
	m, err := seq.New(g, seq.WithPlanner(seq.Planner{Buckets: []int{16, 64, 512}, MaxTokens: 256}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var sessions [2]device.Session
	for i := range sessions {
		if sessions[i], err = m.Start(ctx, device.SessionConfig{BatchSize: len(long), Replicas: 1, Sessions: 2, Schema: tokenSchema, Allocator: mem}); err != nil {
			t.Fatal(err)
		}
		defer sessions[i].Shutdown(ctx)
	}
	recs := [2]arrow.RecordBatch{records(mem, long, len(long))[0], records(mem, short, len(short))[0]}
	defer recs[0].Release()
	defer recs[1].Release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		res[0], errs[0] = sessions[0].Predict(ctx, device.Batch{Index: 0, Record: recs[0]})
	}()
	<-g.entered
	res[1], errs[1] = sessions[1].Predict(ctx, device.Batch{Index: 1, Record: recs[1]})
	close(g.hold)
	<-done
	return res, errs, m.Stats().SubBatches
}

// TestSessionsShareWindows: a session whose window has ended runs the
// sub-batches of another session's window while that one is held in its
// first, and every row's output is still its own, in order.
func TestSessionsShareWindows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	long, short := rows(t, 396), [][]int64{{5, 6, 7}, {8, 9}}
	g := &gated{Engine: &seqtest.Engine{Width: width}, entered: make(chan struct{}), hold: make(chan struct{})}
	res, errs, subBatches := twoWindows(t, mem, g, long, short)
	for i, r := range res {
		if errs[i] != nil {
			t.Fatalf("window %d: %v", i, errs[i])
		}
		defer r.Release()
	}
	if subBatches < 4 {
		t.Fatalf("%d sub-batches: too few to share", subBatches)
	}
	// Session 0 ran its first sub-batch alone; session 1 its own window
	// (one sub-batch) and all the rest of session 0's.
	if got0, got1 := g.runs[0].Load(), g.runs[1].Load(); got0 != 1 || got1 != subBatches-1 {
		t.Errorf("session runs %d and %d, want 1 and %d", got0, got1, subBatches-1)
	}
	for w, window := range [][][]int64{long, short} {
		col := res[w].Column(res[w].Schema().FieldIndices("embedding")[0]).(*array.FixedSizeList)
		vals := col.ListValues().(*array.Float32).Float32Values()
		if col.Len() != len(window) {
			t.Fatalf("window %d: %d rows out, %d in", w, col.Len(), len(window))
		}
		for i, ids := range window {
			pooled, _, _ := seqtest.Reference(width, ids[:min(len(ids), 512)])
			if got := vals[i*width : (i+1)*width]; !near(got, pooled, 1e-6) {
				t.Fatalf("window %d, row %d: %v, alone %v", w, i, got, pooled)
			}
		}
	}
}

// TestHelperFailureFailsItsWindow: a sub-batch that fails on a helper's
// engine fails the window it belongs to, named, and not the helper's own.
func TestHelperFailureFailsItsWindow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g := &gated{Engine: &seqtest.Engine{Width: width}, entered: make(chan struct{}), hold: make(chan struct{}), failHelp: true}
	res, errs, _ := twoWindows(t, mem, g, rows(t, 396), [][]int64{{5, 6, 7}, {8, 9}})
	if errs[1] != nil {
		t.Fatalf("the helper's own window: %v", errs[1])
	}
	res[1].Release()
	if !errors.Is(errs[0], errHelp) || !strings.Contains(errs[0].Error(), "window 0, sub-batch") {
		t.Fatalf("the helped window: %v, want %v naming its sub-batch", errs[0], errHelp)
	}
	if res[0] != nil {
		res[0].Release()
		t.Error("a failed window returned a record")
	}
	// The helper stopped at the first failure.
	if got := g.runs[1].Load(); got != 2 {
		t.Errorf("the helper ran %d sub-batches, want its own and the one that failed", got)
	}
}

// recorder records the shapes its sessions run, in order.
type recorder struct {
	*seqtest.Engine
	shapes []seq.Shape
}

type recorderSession struct {
	seq.EngineSession
	r *recorder
}

func (r *recorder) Start(ctx context.Context, cfg seq.EngineConfig) (seq.EngineSession, error) {
	es, err := r.Engine.Start(ctx, cfg)
	return &recorderSession{EngineSession: es, r: r}, err
}

func (s *recorderSession) Run(ctx context.Context, b *seq.Batch) ([][]float32, error) {
	s.r.shapes = append(s.r.shapes, b.Shape)
	return s.EngineSession.Run(ctx, b)
}

// TestLargestSubBatchFirst: a window runs its sub-batches by the memory
// their attention takes (rows × tokens²), largest first, so an arena
// grows once to the window's largest.
func TestLargestSubBatchFirst(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := &recorder{Engine: &seqtest.Engine{Width: width}}
	m, err := seq.New(r, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512), MaxTokens: 2048}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, mem, m, rows(t, 1000), 1000); err != nil {
		t.Fatal(err)
	}
	weight := func(sh seq.Shape) int { return sh.Rows * sh.Tokens * sh.Tokens }
	if len(r.shapes) < 10 {
		t.Fatalf("%d sub-batches: too few to order", len(r.shapes))
	}
	for i := 1; i < len(r.shapes); i++ {
		if weight(r.shapes[i]) > weight(r.shapes[i-1]) {
			t.Fatalf("sub-batch %d (%s) ran after %s, a smaller one", i, r.shapes[i], r.shapes[i-1])
		}
	}
}
