package seq

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// A window's sub-batches are shared among the model's sessions: the
// session whose window it is runs them in turn, and a session whose own
// window has ended takes those not yet taken before it returns. Without
// it each session ends on its own window's last sub-batches while the
// others wait (two windows on two sessions kept a MiniLM job's device
// busy 82% of the time), where the model alone draws every sub-batch
// from one queue.

// window is one Predict call's planned sub-batches, while they run.
type window struct {
	// ctx is the caller's: a sub-batch runs under it whichever session
	// runs it, so a helper neither outlives the caller nor fails it.
	ctx         context.Context
	index       int
	plan        []SubBatch
	toks, types *tokenRows
	lengths     []int
	outs        *outputs // each sub-batch writes its own rows

	mu      sync.Mutex
	next    int            // the first sub-batch not yet taken
	helpers sync.WaitGroup // sub-batches other sessions are running
	err     error
}

// take returns the next sub-batch to run, or false once every one is
// taken or the window has failed. A helper's take is counted in
// helpers, under the lock, so the owner's last take orders it before
// the owner waits.
func (w *window) take(helper bool) (SubBatch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next >= len(w.plan) {
		return SubBatch{}, false
	}
	sb := w.plan[w.next]
	w.next++
	if helper {
		w.helpers.Add(1)
	}
	return sb, true
}

// fail keeps the window's first error and stops its sub-batches being
// taken.
func (w *window) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.next = len(w.plan)
}

// windows are a model's windows whose sub-batches may still be taken,
// oldest first.
type windows struct {
	mu   sync.Mutex
	list []*window
}

func (ws *windows) add(w *window) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.list = append(ws.list, w)
}

func (ws *windows) remove(w *window) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.list = slices.DeleteFunc(ws.list, func(x *window) bool { return x == w })
}

func (ws *windows) snapshot() []*window {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return slices.Clone(ws.list)
}

// run runs window w, its sub-batches on s's engine and on the engines of
// sessions that take some, and then helps the model's other windows.
func (s *session) run(w *window) error {
	s.m.running.add(w)
	for {
		sb, ok := w.take(false)
		if !ok {
			break
		}
		if err := s.runSub(w, sb); err != nil {
			w.fail(err)
			break
		}
	}
	s.m.running.remove(w)
	w.helpers.Wait()
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	s.help(w.ctx)
	return nil
}

// help runs sub-batches of the windows running when it starts, until
// none is left to take or ctx ends: those of later windows are their
// sessions', so a session is back for its next window within one
// sub-batch of the others finishing theirs.
func (s *session) help(ctx context.Context) {
	for _, w := range s.m.running.snapshot() {
		for ctx.Err() == nil {
			sb, ok := w.take(true)
			if !ok {
				break
			}
			if err := s.runSub(w, sb); err != nil {
				w.fail(err)
			}
			w.helpers.Done()
		}
	}
}

// largestFirst orders a copy of a plan by the memory a sub-batch's
// attention takes (rows × tokens²), then by its token slots, largest
// first: an engine whose allocator keeps what it has grown to (ONNX
// Runtime's arena) grows once to a window's largest sub-batch, and the
// smaller ones reuse it, where growing shape by shape holds each
// growth. The smallest come last, so sessions sharing a window end
// together.
func largestFirst(plan []SubBatch) []SubBatch {
	weight := func(sh Shape) int64 { return int64(sh.Rows) * int64(sh.Tokens) * int64(sh.Tokens) }
	return slices.SortedStableFunc(slices.Values(plan), func(a, b SubBatch) int {
		return cmp.Or(cmp.Compare(weight(b.Shape), weight(a.Shape)), cmp.Compare(b.Shape.Slots(), a.Shape.Slots()))
	})
}

// runSub pads, runs and scatters one sub-batch of w on s's engine.
func (s *session) runSub(w *window, sb SubBatch) error {
	batch := s.batch(sb.Shape)
	s.m.fill(batch, sb, w.toks, w.types, w.lengths)
	res, err := s.engine.Run(w.ctx, batch)
	if err == nil {
		err = s.m.scatter(w.outs, &s.scratch, res, sb, w.lengths)
	}
	if err != nil {
		return fmt.Errorf("seq: window %d, sub-batch %s: %w", w.index, sb.Shape, err)
	}
	return nil
}
