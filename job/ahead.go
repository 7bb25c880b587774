package job

import (
	"context"
	"iter"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/util"
	"golang.org/x/sync/semaphore"

	"github.com/drainpipe/drainpipe/sink"
)

// aheadSlots bounds the records queued ahead of the output, whatever
// their bytes.
const aheadSlots = 1024

// aheadBytes bounds the bytes of the records queued ahead of the output:
// as much as a row group of the output holds (rowGroupBytes), the sink's
// default where maxMemory is 0.
func aheadBytes(maxMemory int64) int64 {
	if b := rowGroupBytes(maxMemory); b > 0 {
		return b
	}
	return sink.DefaultRowGroupBytes
}

// ahead runs records(ctx) on a goroutine of its own and yields them, in
// order, through a queue of up to budget bytes (a record larger than the
// budget passes alone). The output writes in bursts: a row group encoded
// whole, a part committed. Handed the predictions straight, the device
// waited out every burst, a tenth of a job's time; with the queue it goes
// on predicting. Records are the caller's, as records' are.
//
// Leaving the loop early, or ctx ending, cancels records' context and
// releases what was queued, unyielded; the goroutine has stopped when the
// range statement returns.
// records must end once its context is done, and be drained whatever
// yield says, as the job's record sources are.
func ahead(ctx context.Context, records func(context.Context) iter.Seq2[arrow.RecordBatch, error], budget int64) iter.Seq2[arrow.RecordBatch, error] {
	type queued struct {
		rec  arrow.RecordBatch
		err  error
		size int64
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		run, cancel := context.WithCancel(ctx)
		defer cancel()
		room := semaphore.NewWeighted(budget)
		q := make(chan queued, aheadSlots)
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			defer close(q)
			for rec, err := range records(run) {
				it := queued{rec: rec, err: err}
				if rec != nil {
					it.size = min(util.TotalRecordSize(rec), budget)
				}
				if room.Acquire(run, it.size) != nil {
					release(it.rec) // left early: nobody takes it
					continue
				}
				select {
				case q <- it:
				case <-run.Done():
					release(it.rec)
					room.Release(it.size)
				}
			}
		})
		stopped := false
		for it := range q {
			if stopped || run.Err() != nil {
				// Nothing is yielded once ctx ends, as nothing is sent
				// after a Predictor's: a part is not committed under a
				// cancelled context.
				release(it.rec)
			} else if !yield(it.rec, it.err) {
				stopped = true
				cancel()
			}
			room.Release(it.size)
		}
	}
}

func release(rec arrow.RecordBatch) {
	if rec != nil {
		rec.Release()
	}
}
