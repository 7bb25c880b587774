package main

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
)

// onlineCallers is the closed-loop callers of the Batcher goal.
const onlineCallers = 64

// batcherVsOffline measures the Batcher's own cost: 64 callers sending
// one-row requests in a closed loop (the default options, allowed sizes
// 16 up to the batch), against the Predictor offline over the same number of rows at
// the mean batch the Batcher formed, so the device's work is the same. It
// returns the ratio of their rates.
func (c *config) batcherVsOffline(m device.Model, recs []arrow.RecordBatch, sessions int) float64 {
	// The callers send the rows of the first records, over and over: a
	// record a row for all of them would fill the heap with millions of
	// small objects for the collector to mark, a cost of the benchmark,
	// not of the Batcher.
	var pool []arrow.RecordBatch
	total := int64(0)
	for _, rec := range recs {
		for i := int64(0); i < rec.NumRows() && len(pool) < 4096; i++ {
			pool = append(pool, rec.NewSlice(i, i+1))
		}
		total += rec.NumRows()
	}
	defer func() {
		for _, r := range pool {
			r.Release()
		}
	}()
	var sizes []int
	for s := 16; s < c.batch; s *= 2 {
		sizes = append(sizes, s)
	}
	p, err := predict.New(m, predict.WithBatchSizes(append(sizes, c.batch)...), predict.WithGroups(sessions), predict.WithAllocator(c.mem))
	check(err)
	schema := recs[0].Schema()
	b, err := online.NewBatcher(context.Background(), p, schema, online.Options{QueueRows: 1 << 20})
	check(err)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range onlineCallers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < total; i = next.Add(1) - 1 {
				out, err := b.Predict(context.Background(), pool[i%int64(len(pool))])
				check(err)
				out.Release()
			}
		})
	}
	wg.Wait()
	batcher := time.Since(began).Seconds()
	check(b.Close(context.Background()))
	st := b.Stats()
	mean := int(math.Round(float64(st.Rows+st.PaddedRows) / float64(max(st.Batches, 1))))

	p, err = predict.New(m, predict.WithBatchSize(max(mean, 1)), predict.WithGroups(sessions), predict.WithAllocator(c.mem))
	check(err)
	began = time.Now()
	for rec, err := range p.All(context.Background(), dataset.FromRecords(schema, recs...)) {
		check(err)
		rec.Release()
	}
	return time.Since(began).Seconds() / batcher
}
