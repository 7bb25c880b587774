package online

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/runner"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
)

var (
	// ErrOverloaded reports a request refused at once because the queue
	// already holds its limit of rows (Options.QueueRows): load is shed, not
	// buffered without end.
	ErrOverloaded = errors.New("online: overloaded: the request queue is full")
	// ErrClosed reports a request to a Batcher that is closing or closed.
	ErrClosed = errors.New("online: batcher closed")
)

// Batcher answers prediction requests from any number of goroutines,
// cutting their rows into batches that close when full or when the oldest
// queued row has waited the maximum delay (Options.MaxDelay), whichever
// comes first. A batch closed early is padded to the smallest allowed
// batch size that holds it (predict.WithBatchSizes), so the device still
// sees a few static shapes. Requests larger than a batch are split across
// batches and put back together.
//
// Make one with [NewBatcher]; it must be closed with Close.
type Batcher struct {
	set     runner.Settings
	opts    Options
	schema  *arrow.Schema
	padder  *pad.Padder
	workers []runner.Group
	onStats bool // call set.OnStats when the sessions are down (not in a Stream)
	began   time.Time

	base    context.Context // batches run under it
	stop    context.CancelCauseFunc
	wake    chan struct{}                // a request arrived, left, or Close began
	free    chan struct{}                // a worker finished a batch
	work    chan *job                    // batches for the workers
	stopped chan struct{}                // closed once every session has shut down
	downErr error                        // the sessions' shutdown errors, set before stopped closes
	running sync.WaitGroup               // the dispatcher and the workers
	seen    atomic.Pointer[arrow.Schema] // the last request schema found equal

	mu         sync.Mutex
	queue      []*request // FIFO; the head may be partly dispatched
	queuedRows int
	idle       int // workers without a batch, as the dispatcher counts them
	closing    bool
	flushing   bool // run queued rows without waiting for their delay
	batches    int  // batches formed, for batch indices
	stats      onlineStats
}

// job is one batch: consecutive row ranges of queued requests.
type job struct {
	index int
	segs  []segment
	rows  int // real rows
	size  int // padded size
}

type segment struct {
	req  *request
	off  int               // the first row of req in this batch
	rows arrow.RecordBatch // those rows, a zero-copy slice
}

// NewBatcher starts p's session groups (predict.WithGroups groups of
// predict.WithReplicas sessions each) and returns a Batcher for records of
// schema, batching as opts say. The sessions are running when it returns;
// ctx bounds their start only. The Predictor's hooks, passthrough columns,
// allocator and logger apply; its WithStats function is called with the
// Batcher's totals once Close has shut the sessions down. A Predictor
// given options that only Predict and All apply (WithPrefetch,
// WithPadding, WithSetAside) is refused.
func NewBatcher(ctx context.Context, p *predict.Predictor, schema *arrow.Schema, opts Options) (*Batcher, error) {
	return newBatcher(ctx, p, schema, opts, true)
}

func newBatcher(ctx context.Context, p *predict.Predictor, schema *arrow.Schema, opts Options, onStats bool) (*Batcher, error) {
	set := runner.Of(p)
	if len(set.DatasetOnly) > 0 {
		return nil, fmt.Errorf("online: %s apply to Predict and All, not to online batching", strings.Join(set.DatasetOnly, ", "))
	}
	opts, err := opts.withDefaults(set.BatchSize())
	if err != nil {
		return nil, err
	}
	padder, err := pad.New(set.Allocator, schema, set.BatchSize())
	if err != nil {
		return nil, fmt.Errorf("online: %w", err)
	}
	b := &Batcher{set: set, opts: opts, schema: schema, padder: padder, onStats: onStats, began: time.Now(),
		wake: make(chan struct{}, 1), free: make(chan struct{}, set.Groups),
		work: make(chan *job, set.Groups), stopped: make(chan struct{})}
	for range set.Groups {
		g, err := runner.StartGroup(p, ctx, padder.Schema())
		if err != nil {
			for _, w := range b.workers {
				err = errors.Join(err, w.Shutdown(ctx))
			}
			padder.Release()
			return nil, err
		}
		b.workers = append(b.workers, g)
	}
	b.base, b.stop = context.WithCancelCause(context.WithoutCancel(ctx))
	set.Logger.LogAttrs(ctx, slog.LevelInfo, "batcher started", slog.Int("batch_size", set.BatchSize()),
		slog.Any("batch_sizes", set.BatchSizes), slog.Int("groups", set.Groups), slog.Int("replicas", set.Replicas),
		slog.Duration("max_delay", opts.MaxDelay), slog.Int("queue_rows", opts.QueueRows))
	b.idle = len(b.workers)
	for _, w := range b.workers {
		b.running.Go(func() { b.runWorker(w) })
	}
	b.running.Go(b.dispatch)
	go func() {
		b.running.Wait()
		b.shutdown()
	}()
	return b, nil
}

// Schema returns the schema requests must have.
func (b *Batcher) Schema() *arrow.Schema { return b.schema }

// QueueRows is the bound on the rows held queued (Options.QueueRows,
// or its default).
func (b *Batcher) QueueRows() int { return b.opts.QueueRows }

// QueuedRows returns the rows waiting for a batch now: Stats' QueuedRows
// without the rest of the snapshot, for a gauge read often.
func (b *Batcher) QueuedRows() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queuedRows
}

// Predict queues the rows of rec and returns their predictions: one row per
// row of rec, in order, owned by the caller. rec stays the caller's; the
// Batcher holds its own reference while it needs one.
//
// The request's deadline is ctx's or the default timeout (Options.Timeout),
// whichever is sooner. A request that expires or is cancelled while queued
// leaves the queue at once; rows already in a running batch are computed
// and dropped. A full queue refuses the request at once with
// [ErrOverloaded], a closing Batcher with [ErrClosed]. A failing batch
// fails only the requests with rows in it.
func (b *Batcher) Predict(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if t := b.opts.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	r, err := b.submit(ctx, rec, true)
	if err != nil {
		return nil, err
	}
	return b.wait(ctx, r)
}

// Close stops taking requests (they fail with [ErrClosed]), answers the
// queued ones, waits for running batches and shuts every session down
// exactly once. If ctx ends first, the requests still queued fail, running
// batches see their context cancelled, and the sessions still shut down
// before Close returns. Close may be called more than once; every call
// returns the sessions' shutdown errors.
func (b *Batcher) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.signal()
	select {
	case <-b.stopped:
	case <-ctx.Done():
		err := fmt.Errorf("%w before its requests were answered: %w", ErrClosed, context.Cause(ctx))
		b.mu.Lock()
		queued := slices.Clone(b.queue)
		for _, r := range queued {
			b.dequeue(r)
		}
		b.mu.Unlock()
		for _, r := range queued {
			b.settle(r, nil, err)
		}
		b.stop(err)
		<-b.stopped
	}
	return b.downErr
}

// submit queues rec's rows. shed refuses a request beyond the queue limit.
func (b *Batcher) submit(ctx context.Context, rec arrow.RecordBatch, shed bool) (*request, error) {
	if rec == nil {
		return nil, errors.New("online: nil record")
	}
	if s := rec.Schema(); s != b.schema && s != b.seen.Load() {
		if !s.Equal(b.schema) {
			return nil, fmt.Errorf("%w: expected %s, got %s", dataset.ErrSchemaMismatch, b.schema, s)
		}
		// Callers tend to send records of one schema value: compare by
		// pointer from now on.
		b.seen.Store(s)
	}
	rows := int(rec.NumRows())
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := context.Cause(ctx); err != nil {
		// Over before it began: counted as the ones that end queued are.
		if errors.Is(err, context.DeadlineExceeded) {
			b.stats.Timeouts++
		} else {
			b.stats.Cancellations++
		}
		return nil, err
	}
	if b.closing {
		return nil, ErrClosed
	}
	if limit := b.opts.QueueRows; shed && b.queuedRows > 0 && b.queuedRows+rows > limit {
		b.stats.Overloads++
		return nil, fmt.Errorf("%w: %d rows queued, %d more asked, limit %d", ErrOverloaded, b.queuedRows, rows, limit)
	}
	if limit := b.opts.QueueRequests; shed && limit > 0 && len(b.queue) >= limit {
		b.stats.Overloads++
		return nil, fmt.Errorf("%w: %d requests queued, limit %d", ErrOverloaded, len(b.queue), limit)
	}
	rec.Retain()
	r := &request{ctx: ctx, rec: rec, rows: rows, queued: true, arrived: b.since(), done: make(chan struct{})}
	b.queue = append(b.queue, r)
	b.queuedRows += rows
	if b.idle > 0 && (len(b.queue) == 1 || b.queuedRows-rows < b.due() && b.queuedRows >= b.due()) {
		// A batch may be due: the queue has a new oldest row to time,
		// or enough rows to run. Otherwise nothing the dispatcher
		// decides has changed, and waking it for every request cost a
		// goroutine switch each.
		b.signal()
	}
	return r, nil
}

// wait returns r's predictions, or gives r up when ctx ends first.
func (b *Batcher) wait(ctx context.Context, r *request) (arrow.RecordBatch, error) {
	if ctx.Done() == nil {
		<-r.done // a context that never ends: no select needed
	} else {
		select {
		case <-r.done:
		case <-ctx.Done():
			b.giveUp(ctx, r)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.take(), nil
}

// giveUp settles r with ctx's cause, unless r has its outcome already.
func (b *Batcher) giveUp(ctx context.Context, r *request) {
	b.mu.Lock()
	b.dequeue(r)
	b.mu.Unlock()
	if b.settle(r, nil, fmt.Errorf("online: request: %w", context.Cause(ctx))) {
		b.mu.Lock()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			b.stats.Timeouts++
		} else {
			b.stats.Cancellations++
		}
		b.mu.Unlock()
	}
}

// since returns the time since the Batcher began, on the monotonic clock
// alone: time.Now reads the wall clock too, at twice the cost, and the
// Batcher reads the clock twice a request.
func (b *Batcher) since() time.Duration { return time.Since(b.began) }

// due returns the queued rows that make a batch run before the oldest
// row's delay is up. b.mu is held.
func (b *Batcher) due() int {
	if b.opts.NoEager {
		return b.set.BatchSize()
	}
	return b.set.BatchSizes[0]
}

// signal wakes the dispatcher without blocking.
func (b *Batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// dequeue takes r out of the queue, if it is there. b.mu is held.
func (b *Batcher) dequeue(r *request) {
	if !r.queued {
		return
	}
	if i := slices.Index(b.queue, r); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	b.queuedRows -= r.rows - r.next
	r.leave()
}

// dispatch forms batches while a worker is free, until the Batcher is
// closed and drained. It never blocks on a device.
func (b *Batcher) dispatch() {
	defer close(b.work)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		b.mu.Lock()
		j, wait, done := b.next(b.idle)
		if j != nil {
			b.idle--
		}
		b.mu.Unlock()
		if done {
			return
		}
		if j != nil {
			b.work <- j // buffered for every worker: never blocks
			continue
		}
		var due <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-b.wake:
		case <-b.free:
			b.mu.Lock()
			b.idle++
			b.mu.Unlock()
		case <-due:
		}
		timer.Stop()
	}
}

// next forms the next batch if one is due and a worker is idle; else it
// says how long until the oldest row's delay is up (0: wait for an event),
// or that the Batcher is closed and drained. b.mu is held.
func (b *Batcher) next(idle int) (j *job, wait time.Duration, done bool) {
	o, batchSize := &b.opts, b.set.BatchSize()
	if len(b.queue) == 0 {
		return nil, 0, b.closing && idle == len(b.workers)
	}
	if idle == 0 {
		return nil, 0, false
	}
	now := b.since()
	sizes := b.set.BatchSizes
	eager := !o.NoEager && b.queuedRows >= sizes[0]
	if !b.closing && !b.flushing && b.queuedRows < b.due() {
		if left := b.queue[0].arrived + o.MaxDelay - now; left > 0 {
			return nil, left, false
		}
	}
	take := min(b.queuedRows, batchSize)
	if (o.BatchDown || eager) && take < batchSize {
		// Run the largest allowed size that is full; keep the rest queued.
		for i := len(sizes) - 1; i >= 0; i-- {
			if sizes[i] <= take {
				take = sizes[i]
				break
			}
		}
	}
	j = &job{index: b.batches, rows: take, size: b.set.PaddedSize(take)}
	b.batches++
	for len(b.queue) > 0 {
		r := b.queue[0]
		left := r.rows - r.next
		if left > 0 && take == 0 {
			break
		}
		n := min(left, take)
		seg := segment{req: r, off: r.next}
		if n == r.rows {
			// The whole request: the queue's reference moves to the batch.
			seg.rows, r.rec = r.rec, nil
		} else {
			seg.rows = r.rec.NewSlice(int64(r.next), int64(r.next+n))
		}
		j.segs = append(j.segs, seg)
		r.next += n
		take -= n
		b.queuedRows -= n
		if r.next < r.rows {
			break
		}
		b.queue = b.queue[1:]
		r.leave()
		r.waited = now - r.arrived
		b.stats.queueWait.add(r.waited)
	}
	return j, 0, false
}
