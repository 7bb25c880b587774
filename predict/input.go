package predict

import (
	"context"
	"iter"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
)

// release releases a batch's record, if it has one.
func release(b device.Batch) {
	if b.Record != nil {
		b.Record.Release()
	}
}

// inputs reads ds in batches of the global batch size and pads each one,
// yielding padded batches in order. Each yielded batch belongs to the loop
// body, which must release it.
func (p *Predictor) inputs(ds *dataset.Dataset, padder *pad.Padder) iter.Seq2[device.Batch, error] {
	return func(yield func(device.Batch, error) bool) {
		index := 0
		for span, err := range ds.Spans(p.cfg.mem, p.cfg.batchSize) {
			if err != nil {
				yield(device.Batch{}, inputError(index, err))
				return
			}
			rec, padding, err := padder.PadRows(span.Record, span.Offset, span.Rows, p.cfg.paddedSize(span.Rows))
			if err != nil {
				yield(device.Batch{}, inputError(index, err))
				return
			}
			// The loop body owns the batch from here, even if it stops.
			if !yield(device.Batch{Index: index, Record: rec, Padding: padding}, nil) {
				return
			}
			index++
		}
	}
}

// prefetch runs seq in its own goroutine, up to k values ahead of the
// consumer. Values the consumer never takes are released. The goroutine
// has exited when the returned iterator returns.
func prefetch[T any](ctx context.Context, seq iter.Seq2[T, error], k int, release func(T)) iter.Seq2[T, error] {
	type item struct {
		v   T
		err error
	}
	return func(yield func(T, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		ch := make(chan item, k)
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(ch)
			for v, err := range seq {
				select {
				case ch <- item{v, err}:
				case <-ctx.Done():
					release(v)
					return
				}
				if err != nil {
					return
				}
			}
		})
		defer func() {
			cancel()
			for it := range ch {
				release(it.v)
			}
			wg.Wait()
		}()
		for it := range ch {
			if !yield(it.v, it.err) {
				return
			}
		}
	}
}

// paddedSize returns the number of rows a batch of rows real rows is padded
// to: the smallest allowed size that holds it, or for a model that takes
// short batches (device.ShortBatcher) the smallest multiple of the
// replicas.
func (c *config) paddedSize(rows int) int {
	if c.short {
		return (rows + c.replicas - 1) / c.replicas * c.replicas
	}
	for _, s := range c.batchSizes {
		if s >= rows {
			return s
		}
	}
	return c.batchSize
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
