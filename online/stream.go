package online

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/semaphore"

	"github.com/drainpipe/drainpipe/predict"
)

// Stream predicts the records arriving on in, of any row counts and at any
// pace, and streams back one Result per input record, with exactly its
// rows, in input order (Result.Batch is the record's index). Rows are
// predicted in batches cut across record boundaries that close when full
// or when the oldest waiting row has waited the maximum delay
// (Options.MaxDelay), padded to the smallest allowed size that holds them.
// Records sent on in belong to the stream, which releases them; records
// received from the channel belong to the receiver.
//
// Closing in runs the rows still waiting at once. The stream holds at most
// Options.QueueRows rows it has not yet answered and stops reading in
// while it is full: a fast producer is slowed, never refused.
//
// The contract is predict.Predictor.Predict's: drain the channel or cancel
// ctx. The sessions shut down exactly once, and the channel closes after
// they have (and after the Predictor's WithStats function, if any, has had
// the run's Stats). A failure, a refused option among them, arrives as the
// last Result; the stream then stops reading in, so a producer should also
// watch ctx (cancel it once the consumer stops).
func Stream(ctx context.Context, p *predict.Predictor, schema *arrow.Schema, in <-chan arrow.RecordBatch, opts Options) <-chan predict.Result {
	out := make(chan predict.Result)
	go func() {
		defer close(out)
		err := stream(ctx, p, schema, in, opts, out)
		if ctx.Err() != nil || err == nil {
			return // the consumer has gone, or all was delivered
		}
		select {
		case out <- predict.Result{Batch: -1, Err: err}:
		case <-ctx.Done():
		}
	}()
	return out
}

func stream(ctx context.Context, p *predict.Predictor, schema *arrow.Schema, in <-chan arrow.RecordBatch, opts Options, out chan<- predict.Result) (err error) {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if opts.Timeout != 0 {
		return fmt.Errorf("online: Options.Timeout is for a Batcher's requests; bound a Stream with its context")
	}
	began := time.Now()
	b, err := newBatcher(ctx, p, schema, opts, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	room := semaphore.NewWeighted(int64(b.opts.QueueRows))
	type pending struct {
		req    *request
		weight int64
	}
	// Records in flight are bounded by room (a record weighs at least 1),
	// so this buffer rarely fills; when it does, the reader waits.
	queued := make(chan pending, min(b.opts.QueueRows, 1<<16))
	var readErr error
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(queued)
		// The input is closed or the stream stops: run what waits now.
		defer b.flush()
		for i := 0; ; i++ {
			var rec arrow.RecordBatch
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				rec = r
			case <-ctx.Done():
				return
			}
			w := min(max(rec.NumRows(), 1), int64(b.opts.QueueRows))
			if err := room.Acquire(ctx, w); err != nil {
				rec.Release()
				return
			}
			r, err := b.submit(ctx, rec, false)
			rec.Release()
			if err != nil {
				room.Release(w)
				if ctx.Err() == nil {
					// Answer the records before this one, then fail.
					readErr = fmt.Errorf("online: stream record %d: %w", i, err)
				}
				return
			}
			queued <- pending{r, w} // the writer takes or discards every one
		}
	})
	defer func() {
		cancel(errStreamDone)
		for q := range queued {
			b.abandon(q.req)
		}
		reader.Wait()
		err = errors.Join(err, b.Close(context.WithoutCancel(ctx)))
		if fn := b.set.OnStats; fn != nil {
			fn(b.Stats().totals(time.Since(began)))
		}
	}()
	i := 0
	for q := range queued {
		rec, err := b.wait(ctx, q.req)
		room.Release(q.weight)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("online: stream record %d: %w", i, err)
		}
		select {
		case out <- predict.Result{Record: rec, Batch: i}:
		case <-ctx.Done():
			rec.Release()
			return context.Cause(ctx)
		}
		i++
	}
	reader.Wait()
	if readErr != nil {
		return readErr
	}
	return context.Cause(ctx)
}

// errStreamDone cancels a stream's own context when it returns.
var errStreamDone = errors.New("online: stream done")

// flush makes the queued rows due now, as when closing, but keeps taking
// requests.
func (b *Batcher) flush() {
	b.mu.Lock()
	b.flushing = true
	b.mu.Unlock()
	b.signal()
}

// abandon gives r up: its queued rows leave the queue and its
// predictions, come or to come, are dropped.
func (b *Batcher) abandon(r *request) {
	b.mu.Lock()
	b.dequeue(r)
	b.mu.Unlock()
	if !b.settle(r, nil, context.Canceled) {
		r.drop()
	}
}
