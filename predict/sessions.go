package predict

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/device"
)

// errDone stops the goroutines of runSessions when it returns.
var errDone = errors.New("predict: run done")

// runSessions runs whole batches on several session groups at once: batch
// i goes to group i mod n, and the predictions are handed to emit in input
// order. A failure, in order, ends the run; every goroutine has stopped
// and every record not delivered is released when it returns.
func (p *Predictor) runSessions(ctx context.Context, input iter.Seq2[device.Batch, error], groups []*group, clk clock, st *Stats, emit func(arrow.RecordBatch, int) bool) error {
	n := len(groups)
	run, cancel := context.WithCancelCause(ctx)
	defer cancel(errDone)
	type item struct {
		b   device.Batch
		err error
	}
	type result struct {
		rec   arrow.RecordBatch
		index int
		err   error
	}
	ins, outs := make([]chan item, n), make([]chan result, n)
	for g := range n {
		ins[g], outs[g] = make(chan item, 1), make(chan result, 1)
	}
	var wg sync.WaitGroup
	var inputWait time.Duration // the feeder's; read after wg.Wait
	wg.Go(func() {
		defer func() {
			for _, ch := range ins {
				close(ch)
			}
		}()
		i := 0
		waitFrom := clk.now()
		for b, err := range input {
			inputWait += clk.now() - waitFrom
			select {
			case ins[i%n] <- item{b, err}:
			case <-run.Done():
				release(b)
				return
			}
			if err != nil {
				return
			}
			i++
			waitFrom = clk.now()
		}
	})
	for g, group := range groups {
		wg.Go(func() {
			defer close(outs[g])
			for it := range ins[g] {
				r := result{index: it.b.Index, err: it.err}
				if r.err == nil && run.Err() != nil {
					release(it.b)
					continue
				}
				if r.err == nil {
					if r.rec, r.err = group.Run(run, it.b); r.err != nil {
						r.err = p.atRunRow(r.err, it.b.Index)
					}
				}
				select {
				case outs[g] <- r:
				case <-run.Done():
					if r.rec != nil {
						r.rec.Release()
					}
				}
			}
		})
	}
	var err error
	for i := 0; ; i++ {
		r, ok := <-outs[i%n]
		if !ok {
			break // group i mod n has no more: no batch i was read
		}
		if r.err != nil {
			err = r.err
			break
		}
		t := clk.now()
		delivered := emit(r.rec, r.index)
		st.ConsumerWait += clk.now() - t
		if !delivered {
			err = context.Cause(ctx)
			break
		}
		if err = context.Cause(ctx); err != nil {
			break
		}
	}
	cancel(errDone)
	for _, ch := range outs {
		for r := range ch {
			if r.rec != nil {
				r.rec.Release()
			}
		}
	}
	wg.Wait()
	st.InputWait += inputWait
	return err
}
