package online

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
)

// ran is a batch the device has run: its predictions or error, for the
// requests with rows in it.
type ran struct {
	j   *job
	out arrow.RecordBatch
	err error
}

// runWorker runs the batches it is given until the dispatcher stops. A
// goroutine of its own hands each batch's rows to its requests (slicing
// the predictions, waking the callers) while the device runs the next:
// done in line, that work left the device idle for a third of the time
// under many small requests.
func (b *Batcher) runWorker(w *predict.Group) {
	done := make(chan ran, 1)
	var delivering sync.WaitGroup
	delivering.Go(func() {
		for r := range done {
			b.answer(r)
		}
	})
	for j := range b.work {
		done <- b.run(w, j)
		b.free <- struct{}{} // buffered for every worker: never blocks
	}
	close(done)
	delivering.Wait()
}

// run predicts one batch.
func (b *Batcher) run(w *predict.Group, j *job) ran {
	began := time.Now()
	out, err := b.predict(w, j)
	device := time.Since(began)
	if err != nil && b.base.Err() != nil {
		// Cut by Close's deadline: the requests' answer is Close's cause
		// (ErrClosed), not the context.Canceled the device saw.
		err = fmt.Errorf("online: batch %d cut: %w", j.index, context.Cause(b.base))
	}
	// Count the batch before its requests' callers wake, so Stats read
	// after Predict returns includes it.
	b.mu.Lock()
	b.stats.batch(j, device)
	b.mu.Unlock()
	if o := b.opts.Observer; o != nil {
		o.ObserveBatch(j.size, j.rows, device)
	}
	return ran{j, out, err}
}

// answer hands each request of a batch its rows, or the batch's error.
func (b *Batcher) answer(r ran) {
	j, out, err := r.j, r.out, r.err
	off := int64(0)
	for _, s := range j.segs {
		n := s.rows.NumRows()
		s.rows.Release()
		if err != nil {
			b.mu.Lock()
			b.dequeue(s.req)
			b.mu.Unlock()
			b.settle(s.req, nil, err)
			continue
		}
		if n == out.NumRows() {
			out.Retain() // the whole batch is this request's
			b.deliver(s.req, s.off, out)
		} else {
			b.deliver(s.req, s.off, out.NewSlice(off, off+n))
		}
		off += n
	}
	if out != nil {
		out.Release()
	}
	if err != nil {
		b.set.Logger.LogAttrs(b.base, slog.LevelError, "batch failed", slog.Int("batch", j.index), slog.Int("rows", j.rows), slog.Any("error", err))
	}
}

// predict pads the batch's rows and runs them through the worker's
// session group.
func (b *Batcher) predict(w *predict.Group, j *job) (arrow.RecordBatch, error) {
	recs := make([]arrow.RecordBatch, len(j.segs))
	for i, s := range j.segs {
		recs[i] = s.rows
	}
	rows, err := dataset.Concat(b.set.Allocator, b.schema, recs)
	if err != nil {
		return nil, fmt.Errorf("online: batch %d: %w", j.index, err)
	}
	rec, padding, err := b.padder.PadTo(rows, j.size)
	rows.Release()
	if err != nil {
		return nil, fmt.Errorf("online: batch %d: input: %w", j.index, err)
	}
	return w.Run(b.base, device.Batch{Index: j.index, Record: rec, Padding: padding})
}

// shutdown shuts every session down once the workers have stopped.
func (b *Batcher) shutdown() {
	ctx := context.WithoutCancel(b.base)
	var errs []error
	for _, w := range b.workers {
		errs = append(errs, w.Shutdown(ctx))
	}
	b.downErr = errors.Join(errs...)
	b.padder.Release()
	b.stop(ErrClosed)
	stats := b.Stats()
	b.set.Logger.LogAttrs(ctx, slog.LevelInfo, "batcher closed", slog.Any("error", b.downErr), stats.attr())
	if fn := b.set.OnStats; fn != nil && b.onStats {
		fn(stats.totals(time.Since(b.began)))
	}
	close(b.stopped)
}

// request is one caller's record on its way through the queue.
type request struct {
	// Owned by the Batcher's mutex.
	rec     arrow.RecordBatch // retained while queued
	rows    int
	next    int  // rows handed to batches
	queued  bool // in the queue (or taken out by a batch, partly)
	arrived time.Time
	waited  time.Duration // from arrival until its last row left the queue

	// Owned by mu.
	mu      sync.Mutex
	pieces  []piece
	got     int
	settled bool
	out     arrow.RecordBatch
	err     error
	done    chan struct{} // closed when settled
}

type piece struct {
	off int
	rec arrow.RecordBatch
}

// leave releases the request's record once it is out of the queue. The
// Batcher's mutex is held.
func (r *request) leave() {
	r.queued = false
	r.rec.Release()
	r.rec = nil
}

// deliver hands r the predictions of its rows from off on. It owns rec.
func (b *Batcher) deliver(r *request, off int, rec arrow.RecordBatch) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		rec.Release()
		return
	}
	r.pieces = append(r.pieces, piece{off, rec})
	r.got += int(rec.NumRows())
	if r.got < r.rows {
		r.mu.Unlock()
		return
	}
	pieces := r.pieces
	r.pieces = nil
	r.mu.Unlock()
	out, err := b.join(pieces)
	b.settle(r, out, err)
}

// join puts a request's pieces together in row order. It owns them.
func (b *Batcher) join(pieces []piece) (arrow.RecordBatch, error) {
	if len(pieces) == 1 {
		return pieces[0].rec, nil
	}
	slices.SortFunc(pieces, func(a, b piece) int { return a.off - b.off })
	recs := pieceRecords(pieces)
	defer releaseAll(recs)
	out, err := dataset.Concat(b.set.Allocator, recs[0].Schema(), recs)
	if err != nil {
		return nil, fmt.Errorf("online: join a request's batches: %w", err)
	}
	return out, nil
}

// settle gives r its outcome, once: it owns out. It reports whether this
// call settled r.
func (b *Batcher) settle(r *request, out arrow.RecordBatch, err error) bool {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		if out != nil {
			out.Release()
		}
		return false
	}
	r.settled = true
	releaseAll(pieceRecords(r.pieces))
	r.pieces = nil
	r.out, r.err = out, err
	r.mu.Unlock()
	// Count the request before its caller wakes, so Stats read after
	// Predict returns includes it.
	latency := time.Since(r.arrived)
	b.mu.Lock()
	waited := r.waited
	if err == nil {
		b.stats.answered(r, latency)
	} else if errors.Is(err, ErrClosed) || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		b.stats.Failures++
	}
	b.mu.Unlock()
	if o := b.opts.Observer; o != nil && err == nil {
		o.ObserveRequest(r.rows, waited, latency)
	}
	close(r.done)
	return true
}

func pieceRecords(ps []piece) []arrow.RecordBatch {
	recs := make([]arrow.RecordBatch, len(ps))
	for i, p := range ps {
		recs[i] = p.rec
	}
	return recs
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
