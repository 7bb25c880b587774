// Command stream predicts records that arrive on a channel, the way a Go
// service streams predictions: a producer goroutine sends 60 records of 1
// to 40 rows of 16 features, a few milliseconds apart; the predictions come
// back one result per record, with exactly its rows, in order. Rows are
// batched across records: a batch runs when 64 rows wait or when the oldest
// has waited 2ms, padded to 8, 16 or 64 rows. The channel closes after the
// session has shut down; a summary line ends the run.
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

const (
	records  = 60
	features = 16
	classes  = 3
)

func main() {
	if err := run(context.Background(), os.Stdout, memory.DefaultAllocator); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, mem memory.Allocator) error {
	model, err := cpu.NewMLP([]int{features, 32, classes}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		return err
	}
	var stats predict.Stats
	p, err := predict.New(model,
		predict.WithBatchSizes(8, 16, 64),
		predict.WithPassthrough("id"),
		predict.WithAllocator(mem),
		predict.WithStats(func(s predict.Stats) { stats = s }),
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the producer if the stream fails

	in := make(chan arrow.RecordBatch)
	sent := 0
	go produce(ctx, mem, in, &sent)

	rows, perClass := 0, make([]int, classes)
	for r := range online.Stream(ctx, p, dataset.TensorSchema(features), in, online.Options{MaxDelay: 2 * time.Millisecond}) {
		if r.Err != nil {
			return r.Err
		}
		class := r.Record.Column(1).(*array.Int64)
		for i := range class.Len() {
			perClass[class.Value(i)]++
		}
		rows += int(r.Record.NumRows())
		fmt.Fprintf(out, "record %2d: %2d predictions\n", r.Batch, r.Record.NumRows())
		r.Record.Release()
	}
	// The channel is closed: the session has shut down.
	fmt.Fprintf(out, "classes: %v\n", perClass)
	fmt.Fprintf(out, "records=%d rows=%d (sent %d) batches=%d padding=%.1f%% device=%v\n",
		records, rows, sent, stats.Batches, 100*stats.PaddingWaste(), stats.DeviceTime.Round(time.Microsecond))
	return nil
}

// produce sends records of 1 to 40 rows at an uneven pace, then closes in.
func produce(ctx context.Context, mem memory.Allocator, in chan<- arrow.RecordBatch, sent *int) {
	defer close(in)
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range records {
		n := 1 + rng.IntN(40)
		var rec arrow.RecordBatch
		for r, err := range dataset.UniformTensors(mem, n, features, n, uint64(i)).Records() {
			if err != nil {
				return
			}
			r.Retain() // borrowed from the loop; the stream takes this reference
			rec = r
		}
		select {
		case in <- rec:
			*sent += n
		case <-ctx.Done():
			rec.Release()
			return
		}
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
	}
}
