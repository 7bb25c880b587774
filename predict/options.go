package predict

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Option configures a Predictor.
type Option func(*config)

type config struct {
	batchSize   int
	sizeSet     bool  // batchSize was given
	batchSizes  []int // allowed sizes, ascending; nil means batchSize only
	replicas    int
	prefetch    int
	mem         memory.Allocator
	hooks       []Hook
	passthrough []string
	keepPadding bool
	logger      *slog.Logger
	onStats     func(Stats)
	setAside    func(row arrow.RecordBatch, err error)

	// Online batching (Batcher, Stream).
	sessions  int
	maxDelay  time.Duration
	queueRows int // 0: 16 batches
	timeout   time.Duration
	batchDown bool
	eager     bool
	observer  Observer
}

// WithBatchSize sets the global batch size: the number of rows of every
// batch the device sees. The default is 128.
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize, c.sizeSet = n, true } }

// WithBatchSizes sets the batch sizes the device accepts, ascending, the
// largest being the batch size (TF Serving's allowed_batch_sizes). The
// final short batch is padded only up to the smallest allowed size that
// holds it, instead of the full batch size. Every size must divide by the
// number of replicas.
func WithBatchSizes(sizes ...int) Option {
	return func(c *config) { c.batchSizes = append([]int{}, sizes...) }
}

// WithReplicas runs n device sessions side by side (TPUEstimator's
// replicas): every global batch is split into n per-replica slices of
// batch size / n rows, run concurrently, and put back together in order.
// The batch size must divide by n. The default is 1.
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// WithPrefetch runs the input side (reading, batching, padding) in its own
// goroutine, up to k batches ahead of the device, like tf.data's prefetch.
// The default, 0, reads each batch in step with the device.
//
// A source that decodes in large records (a CSV chunk, a Parquet row group)
// delivers many batches at once, then decodes for a while. To overlap that
// decoding with the device, k must exceed the number of batches in one
// source record; a smaller k overlaps only k batches of device work per
// record.
func WithPrefetch(k int) Option { return func(c *config) { c.prefetch = k } }

// WithAllocator sets the allocator for batches and predictions. The default
// is memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// WithHooks adds hooks called around every batch, in the order given.
func WithHooks(h ...Hook) Option { return func(c *config) { c.hooks = append(c.hooks, h...) } }

// WithPassthrough copies the named input columns (keys, say) onto the
// predictions, before the model's columns, row-aligned.
func WithPassthrough(columns ...string) Option {
	return func(c *config) { c.passthrough = append(c.passthrough, columns...) }
}

// WithPadding keeps the padding rows in the predictions and appends the
// pad.Column column, for callers that want the raw device output.
func WithPadding(keep bool) Option { return func(c *config) { c.keepPadding = keep } }

// WithLogger sets the logger for session and run events. The default
// discards them.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithStats registers a function that receives the statistics of every run
// after its session has shut down and before its channel closes.
func WithStats(fn func(Stats)) Option { return func(c *config) { c.onStats = fn } }

// WithSetAside keeps a run going when the device fails a batch because of
// some of its rows (poison rows: a value the model refuses, a row that
// crashes it): the Predictor runs the batch again in halves, splitting
// halves that fail again, until the rows that fail on their own are found.
// Each is handed to fn (a one-row record of the input columns, borrowed for
// the call, with the error it failed with) and left out of the
// predictions; every other row is predicted, in order. If every row of a
// batch fails on its own the device is failing, not the rows, and the
// batch's error ends the run as usual. Predict and All only.
func WithSetAside(fn func(row arrow.RecordBatch, err error)) Option {
	return func(c *config) { c.setAside = fn }
}

// WithSessions runs n groups of sessions (each of WithReplicas sessions)
// side by side, each taking whole batches: up to n batches run at once.
// Predict and All give batch i to group i mod n and deliver the
// predictions in input order; a Batcher or Predictor.Stream gives the next
// batch to the next free group. Whole batches on single-threaded sessions
// use the cores better than one session split into replicas (see
// BENCHMARKS.md). Hooks are then called from n goroutines at once. The
// default is 1.
func WithSessions(n int) Option { return func(c *config) { c.sessions = n } }

// WithMaxDelay sets how long a [Batcher] or [Predictor.Stream] lets the
// oldest queued row wait for a batch to fill before running the rows it
// has, padded to the smallest allowed batch size (Triton's
// max_queue_delay, TF Serving's batch_timeout). The default is 2ms; 0 runs
// whatever is queued as soon as a session is free.
func WithMaxDelay(d time.Duration) Option { return func(c *config) { c.maxDelay = d } }

// WithQueueRows bounds the rows a [Batcher] holds queued: a request beyond
// it fails at once with [ErrOverloaded] (a request larger than the bound
// is taken only into an empty queue). [Predictor.Stream] waits for room
// instead. The default is 16 batches.
func WithQueueRows(n int) Option { return func(c *config) { c.queueRows = n } }

// WithTimeout sets a default deadline for each [Batcher.Predict] request,
// used when the request's context has none sooner. The default, 0, sets
// none.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithBatchDown makes a [Batcher] or [Predictor.Stream] whose oldest row
// has waited its delay run the largest allowed batch size it can fill, and
// keep the remaining rows queued, instead of padding all queued rows up to
// the next allowed size (TF Serving's BATCH_DOWN). The default is off.
func WithBatchDown(on bool) Option { return func(c *config) { c.batchDown = on } }

// WithEager lets a free session of a [Batcher] or [Predictor.Stream] take
// the largest allowed batch size the queued rows fill at once, without
// waiting for the delay (Triton's preferred batch sizes); rows that fill no
// allowed size wait for the delay as usual. It keeps sessions busy when few
// rows wait at a time and the batch size is seldom reached; under load the
// queue grows while sessions are busy and batches grow with it. The
// default is on (BENCHMARKS.md has the figures); off, a batch runs only
// when full or when its oldest row has waited the delay.
func WithEager(on bool) Option { return func(c *config) { c.eager = on } }

// Observer is told of a [Batcher]'s (or [Predictor.Stream]'s) batches and
// answered requests as they happen, for metrics such as histograms that
// [BatcherStats]' snapshots cannot give. Its methods are called from the
// Batcher's goroutines, concurrently, and must return quickly.
type Observer interface {
	// ObserveBatch is called after each batch: its padded size, its real
	// rows and the device's time on it (also for a batch that failed).
	ObserveBatch(size, rows int, device time.Duration)
	// ObserveRequest is called for each request answered with predictions:
	// its rows, its time from arrival until its last row left the queue,
	// and until its predictions were ready.
	ObserveRequest(rows int, queueWait, latency time.Duration)
}

// WithObserver makes a [Batcher] or [Predictor.Stream] report to o.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// Hook observes or vetoes batches, like TensorFlow's SessionRunHook. Either
// function may be nil. An error from a hook ends the run with that error;
// the session still shuts down.
type Hook struct {
	// Before is called with the padded batch before the device sees it.
	Before func(ctx context.Context, b device.Batch) error
	// After is called with the batch the device predicted (its rows, those
	// set aside left out) and its predictions, as the consumer will receive
	// them, before they are delivered.
	After func(ctx context.Context, b device.Batch, predictions arrow.RecordBatch) error
}

func (c *config) validate() error {
	if c.batchSizes != nil && !c.sizeSet && len(c.batchSizes) > 0 {
		c.batchSize = c.batchSizes[len(c.batchSizes)-1]
	}
	switch {
	case c.batchSize <= 0:
		return fmt.Errorf("%w: got %d", ErrBatchSize, c.batchSize)
	case c.replicas <= 0:
		return fmt.Errorf("%w: %d replicas, want at least 1", ErrReplicas, c.replicas)
	case c.batchSize%c.replicas != 0:
		return fmt.Errorf("%w: batch size %d does not divide by %d replicas", ErrReplicas, c.batchSize, c.replicas)
	case c.prefetch < 0:
		return fmt.Errorf("predict: prefetch %d, want 0 or more", c.prefetch)
	case c.sessions <= 0:
		return fmt.Errorf("predict: %d sessions, want at least 1", c.sessions)
	case c.maxDelay < 0:
		return fmt.Errorf("predict: max delay %v, want 0 or more", c.maxDelay)
	case c.queueRows < 0:
		return fmt.Errorf("predict: queue rows %d, want 1 or more", c.queueRows)
	case c.timeout < 0:
		return fmt.Errorf("predict: timeout %v, want 0 or more", c.timeout)
	}
	if c.queueRows == 0 {
		c.queueRows = 16 * c.batchSize
	}
	if c.batchSizes == nil {
		return nil
	}
	if len(c.batchSizes) == 0 {
		return fmt.Errorf("%w: the list is empty", ErrBatchSizes)
	}
	for i, s := range c.batchSizes {
		switch {
		case s <= 0:
			return fmt.Errorf("%w: size %d is not positive", ErrBatchSizes, s)
		case i > 0 && s <= c.batchSizes[i-1]:
			return fmt.Errorf("%w: %v is not strictly ascending", ErrBatchSizes, c.batchSizes)
		case s%c.replicas != 0:
			return fmt.Errorf("%w: size %d does not divide by %d replicas", ErrBatchSizes, s, c.replicas)
		}
	}
	if last := c.batchSizes[len(c.batchSizes)-1]; last != c.batchSize {
		return fmt.Errorf("%w: largest size %d, batch size %d", ErrBatchSizes, last, c.batchSize)
	}
	return nil
}

// validateOnline checks the options that only Predict and All take.
func (c *config) validateOnline() error {
	switch {
	case c.keepPadding:
		return errors.New("predict: WithPadding is for Predict and All, not online batching")
	case c.prefetch > 0:
		return errors.New("predict: WithPrefetch is for Predict and All, not online batching")
	case c.setAside != nil:
		return errors.New("predict: WithSetAside is for Predict and All, not online batching")
	}
	return nil
}

// allowedSizes returns the global batch sizes a batch may be padded to.
func (c *config) allowedSizes() []int {
	if c.batchSizes == nil {
		return []int{c.batchSize}
	}
	return c.batchSizes
}

// perReplicaSizes returns the allowed per-replica batch sizes.
func (c *config) perReplicaSizes() []int {
	if c.batchSizes == nil {
		return []int{c.batchSize / c.replicas}
	}
	out := make([]int, len(c.batchSizes))
	for i, s := range c.batchSizes {
		out[i] = s / c.replicas
	}
	return out
}
