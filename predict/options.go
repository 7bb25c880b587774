package predict

import (
	"context"
	"fmt"
	"log/slog"

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
	short       bool  // the model takes short batches (device.ShortBatcher)
	replicas    int
	prefetch    int
	mem         memory.Allocator
	hooks       []Hook
	passthrough []string
	keepPadding bool
	logger      *slog.Logger
	onStats     func(Stats)
	setAside    func(row arrow.RecordBatch, err error)
	sessions    int
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

// WithGroups runs n session groups ([Group], each of WithReplicas
// sessions; Triton calls them instances) side by side, each taking whole
// batches: up to n batches run at once.
// Predict and All give batch i to group i mod n and deliver the
// predictions in input order; package online gives the next batch to the
// next free group. Whole batches on single-threaded sessions
// use the cores better than one session split into replicas (see
// BENCHMARKS.md). Hooks are then called from n goroutines at once. The
// default is 1.
func WithGroups(n int) Option { return func(c *config) { c.sessions = n } }

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
