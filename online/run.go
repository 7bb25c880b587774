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
	"github.com/drainpipe/drainpipe/internal/runner"
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
func (b *Batcher) runWorker(w runner.Group) {
	done := make(chan ran, 1)
	var delivering sync.WaitGroup
	delivering.Go(func() {
		for r := range done {
			b.answer(r)
		}
	})
	for j := range b.work {
		for j != nil {
			done <- b.run(w, j)
			// Take the next batch, if one is due, straight away: handing
			// it over through the dispatcher left the device idle for
			// two goroutine switches a batch.
			b.mu.Lock()
			j, _, _ = b.next(1)
			b.mu.Unlock()
		}
		b.free <- struct{}{} // buffered for every worker: never blocks
	}
	close(done)
	delivering.Wait()
}

// run predicts one batch.
func (b *Batcher) run(w runner.Group, j *job) ran {
	ctx, end := context.Context(b.base), func(time.Duration, error) {}
	if t, ok := b.opts.Observer.(BatchTracer); ok {
		ctx, end = b.startBatch(t, j)
	}
	began := time.Now()
	out, err := b.predict(ctx, w, j)
	device := time.Since(began)
	end(device, err)
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

// startBatch tells a tracer of batch j: its requests' contexts, and the
// longest any of its rows waited.
func (b *Batcher) startBatch(t BatchTracer, j *job) (context.Context, func(time.Duration, error)) {
	ctxs := make([]context.Context, len(j.segs))
	now := b.since()
	var wait time.Duration
	for i, sg := range j.segs {
		ctxs[i] = sg.req.ctx
		if ctxs[i] == nil {
			ctxs[i] = context.Background()
		}
		wait = max(wait, now-sg.req.arrived)
	}
	return t.StartBatch(b.base, j.index, j.size, j.rows, ctxs, wait)
}

// answer hands each request of a batch its rows, or the batch's error.
func (b *Batcher) answer(r ran) {
	j, out, err := r.j, r.out, r.err
	off := int64(0)
	answered := make([]*request, 0, len(j.segs))
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
		if b.deliver(s.req, s.off, out, off, n) {
			answered = append(answered, s.req)
		}
		off += n
	}
	b.announce(answered...)
	if out != nil {
		out.Release()
	}
	if err != nil {
		b.set.Logger.LogAttrs(b.base, slog.LevelError, "batch failed", slog.Int("batch", j.index), slog.Int("rows", j.rows), slog.Any("error", err))
	}
}

// predict pads the batch's rows and runs them through the worker's
// session group, under ctx (the Batcher's, or a tracer's from it).
func (b *Batcher) predict(ctx context.Context, w runner.Group, j *job) (arrow.RecordBatch, error) {
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
	return w.Run(ctx, device.Batch{Index: j.index, Record: rec, Padding: padding})
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
	// ctx is the caller's, for a BatchTracer.
	ctx context.Context
	// Owned by the Batcher's mutex.
	rec     arrow.RecordBatch // retained while queued
	rows    int
	next    int           // rows handed to batches
	queued  bool          // in the queue (or taken out by a batch, partly)
	arrived time.Duration // on the Batcher's clock (since)
	waited  time.Duration // from arrival until its last row left the queue

	// Owned by mu.
	mu      sync.Mutex
	pieces  []piece
	got     int
	settled bool
	from    arrow.RecordBatch // holds the predictions: rows [at, at+rows)
	at      int64
	err     error
	done    chan struct{} // closed when settled
}

type piece struct {
	off int
	rec arrow.RecordBatch
}

// leave releases the request's record once it is out of the queue, if a
// batch did not take it. The Batcher's mutex is held.
func (r *request) leave() {
	r.queued = false
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
}

// deliver hands r the predictions of its rows from off on: rows [at,
// at+n) of out, which stays the caller's. It reports whether r now has its
// outcome, for the caller to announce.
func (b *Batcher) deliver(r *request, off int, out arrow.RecordBatch, at, n int64) bool {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return false
	}
	if r.got == 0 && int(n) == r.rows {
		// All of r in one batch, as most requests are: r's caller slices
		// its rows itself (take), so that the batch's callers do it in
		// parallel rather than this goroutine one after another.
		out.Retain()
		r.settle(out, at, nil)
		r.mu.Unlock()
		return true
	}
	rec := out.NewSlice(at, at+n)
	r.pieces = append(r.pieces, piece{off, rec})
	r.got += int(n)
	if r.got < r.rows {
		r.mu.Unlock()
		return false
	}
	pieces := r.pieces
	r.pieces = nil
	r.mu.Unlock()
	joined, err := b.join(pieces)
	return b.resolve(r, joined, 0, err)
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
	if !b.resolve(r, out, 0, err) {
		return false
	}
	b.announce(r)
	return true
}

// resolve gives r its outcome, once: r's rows of out from row at on (which
// it owns), or err. It reports whether this call did; r's caller waits
// until r is announced.
func (b *Batcher) resolve(r *request, out arrow.RecordBatch, at int64, err error) bool {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		if out != nil {
			out.Release()
		}
		return false
	}
	r.settle(out, at, err)
	r.mu.Unlock()
	return true
}

// settle records r's outcome. r.mu is held, and r is not settled yet.
func (r *request) settle(out arrow.RecordBatch, at int64, err error) {
	r.settled = true
	releaseAll(pieceRecords(r.pieces))
	r.pieces = nil
	r.from, r.at, r.err = out, at, err
}

// take returns r's predictions, owned by the caller, once r is settled:
// its rows of the record it was answered from.
func (r *request) take() arrow.RecordBatch {
	from := r.from
	r.from = nil
	if from == nil || r.at == 0 && from.NumRows() == int64(r.rows) {
		return from
	}
	defer from.Release()
	return from.NewSlice(r.at, r.at+int64(r.rows))
}

// drop releases r's predictions, if it has any, for a caller that no
// longer wants them.
func (r *request) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.from != nil {
		r.from.Release()
		r.from = nil
	}
}

// announce counts resolved requests and wakes their callers: the
// requests a batch answered, under one lock.
func (b *Batcher) announce(rs ...*request) {
	// Count the requests before their callers wake, so Stats read after
	// Predict returns includes them.
	now := b.since()
	b.mu.Lock()
	for _, r := range rs {
		if r.err == nil {
			b.stats.answered(r, now-r.arrived, b.began.Add(now))
		} else if errors.Is(r.err, ErrClosed) || !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			b.stats.Failures++
		}
	}
	b.mu.Unlock()
	for _, r := range rs {
		// r.waited was set when r's last row left the queue, before the
		// batch that answered it ran.
		if o := b.opts.Observer; o != nil && r.err == nil {
			o.ObserveRequest(r.rows, r.waited, now-r.arrived)
		}
		close(r.done)
	}
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
