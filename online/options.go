package online

import (
	"context"
	"fmt"
	"time"
)

// Options configure a [Batcher] or a [Stream]: when a batch closes, how
// many rows may wait, how long a request may take; the shape of TF
// Serving's BasicBatchScheduler::Options and Triton's dynamic_batching
// block. The zero value holds the defaults. The batch sizes, session
// groups, hooks and passthrough columns are the Predictor's.
type Options struct {
	// MaxDelay is how long the oldest queued row may wait for its batch
	// to fill before the queued rows run, padded to the smallest allowed
	// batch size that holds them (Triton's max_queue_delay, TF Serving's
	// batch_timeout). 0 takes the default, 2ms; NoDelay runs whatever is
	// queued as soon as a session group is free.
	MaxDelay time.Duration
	// QueueRows bounds the rows held queued. A Batcher refuses a request
	// beyond it at once with ErrOverloaded (a request larger than the
	// bound is taken only into an empty queue); a Stream stops reading its
	// input until there is room. 0 takes the default, 16 batches.
	QueueRows int
	// QueueRequests, if above 0, also bounds the requests held queued
	// (Triton's max_queue_size counts requests): a Batcher refuses a
	// request past it at once with ErrOverloaded. A Stream, whose input
	// is one flow, ignores it.
	QueueRequests int
	// Timeout is a deadline for each Batcher.Predict request, used when
	// the request's context has none sooner; 0 sets none. A Stream refuses
	// it: its records have no caller of their own to time out (bound the
	// Stream's context instead).
	Timeout time.Duration
	// BatchDown makes a batch whose oldest row has waited MaxDelay run
	// the largest allowed size it fills, and leave the other rows queued,
	// instead of padding every queued row up to the next allowed size (TF
	// Serving's BATCH_DOWN).
	BatchDown bool
	// NoEager makes a batch run only when full or when its oldest row has
	// waited MaxDelay. By default a free session group takes at once the
	// largest allowed size the queued rows fill (Triton's preferred batch
	// sizes), which keeps groups busy when few rows wait at a time;
	// BENCHMARKS.md has the figures.
	NoEager bool
	// Observer, if set, is told of every batch and every request answered.
	Observer Observer
}

// NoDelay is a MaxDelay that runs queued rows as soon as a session group
// is free.
const NoDelay time.Duration = -1

// defaultMaxDelay is MaxDelay's default.
const defaultMaxDelay = 2 * time.Millisecond

// withDefaults checks o and fills in its defaults for batches of
// batchSize rows.
func (o Options) withDefaults(batchSize int) (Options, error) {
	switch {
	case o.MaxDelay < 0 && o.MaxDelay != NoDelay:
		return o, fmt.Errorf("online: max delay %v, want 0 or more (or NoDelay)", o.MaxDelay)
	case o.QueueRows < 0:
		return o, fmt.Errorf("online: queue rows %d, want 1 or more (0: the default)", o.QueueRows)
	case o.QueueRequests < 0:
		return o, fmt.Errorf("online: queue requests %d, want 0 (no bound) or more", o.QueueRequests)
	case o.Timeout < 0:
		return o, fmt.Errorf("online: timeout %v, want 0 or more", o.Timeout)
	}
	switch o.MaxDelay {
	case 0:
		o.MaxDelay = defaultMaxDelay
	case NoDelay:
		o.MaxDelay = 0
	}
	if o.QueueRows == 0 {
		o.QueueRows = 16 * batchSize
	}
	return o, nil
}

// Observer is told of a [Batcher]'s (or a [Stream]'s) batches and
// answered requests as they happen, for metrics such as histograms that
// [Stats] snapshots cannot give. Its methods are called from the Batcher's
// goroutines, concurrently, and must return quickly.
type Observer interface {
	// ObserveBatch is called after each batch: its padded size, its real
	// rows and the device's time on it (also for a batch that failed).
	ObserveBatch(size, rows int, device time.Duration)
	// ObserveRequest is called for each request answered with predictions:
	// its rows, its time from arrival until its last row left the queue,
	// and until its predictions were ready.
	ObserveRequest(rows int, queueWait, latency time.Duration)
}

// BatchTracer is an Observer that also follows each batch as it runs,
// with the contexts of the requests whose rows it holds, in its order: a
// tracer starts a batch span linked to each request's span.
type BatchTracer interface {
	// StartBatch is called as a batch starts to run: its index, padded
	// size and real rows, and each request's context and the time its
	// oldest row waited. The batch runs under the context it returns
	// (ctx, or one derived from it: a span, a seq.ObserveWindows); the
	// function it returns is called once the batch has run, with the
	// device's time and error.
	StartBatch(ctx context.Context, index, size, rows int, requests []context.Context, queueWait time.Duration) (context.Context, func(device time.Duration, err error))
}
