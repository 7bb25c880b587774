package predict_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
)

// The end-to-end workload: MLP 64-256-256-10 at batch 256 over 1,000,003
// rows (the tail batch is short). Run with -benchtime=1x: one op is the
// whole dataset.
const (
	benchRows  = 1_000_003
	benchWidth = 64
	benchBatch = 256
)

func benchModel(b *testing.B) *cpu.MLP {
	m, err := cpu.NewMLP([]int{benchWidth, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchRecords materialises the dataset in memory, so generation is not timed.
func benchRecords(b *testing.B, mem memory.Allocator) *dataset.Dataset {
	var recs []arrow.RecordBatch
	for rec, err := range dataset.UniformTensors(mem, benchRows, benchWidth, 4096, 1).Records() {
		if err != nil {
			b.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	b.Cleanup(func() { arrowtest.Release(recs) })
	return dataset.FromRecords(dataset.TensorSchema(benchWidth), recs...)
}

func BenchmarkMLPEndToEnd(b *testing.B) {
	mem := memory.NewGoAllocator()
	ds := benchRecords(b, mem)
	p, err := predict.New(benchModel(b), predict.WithBatchSize(benchBatch), predict.WithAllocator(mem), predict.WithPassthrough("id"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("channel", func(b *testing.B) {
		start := arrowtest.Mallocs()
		for b.Loop() {
			for r := range p.Predict(context.Background(), ds) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				r.Record.Release()
			}
		}
		arrowtest.ReportPerBatch(b, benchRows, (benchRows+benchBatch-1)/benchBatch, start)
	})
	b.Run("iterator", func(b *testing.B) {
		benchAll(b, p, ds)
	})
}

// benchAll runs p over the benchmark dataset with the iterator form and
// reports per-batch figures.
func benchAll(b *testing.B, p *predict.Predictor, ds *dataset.Dataset) {
	start := arrowtest.Mallocs()
	for b.Loop() {
		for _, err := range p.All(context.Background(), ds) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	arrowtest.ReportPerBatch(b, benchRows, (benchRows+benchBatch-1)/benchBatch, start)
}

// premade pads every batch of ds beforehand, for model-only runs.
func premade(b *testing.B, mem memory.Allocator, ds *dataset.Dataset, padder *pad.Padder) []device.Batch {
	var batches []device.Batch
	for rec, err := range ds.Batches(mem, padder.Size()) {
		if err != nil {
			b.Fatal(err)
		}
		padded, padding, err := padder.Pad(rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(padded.Release)
		batches = append(batches, device.Batch{Index: len(batches), Record: padded, Padding: padding})
	}
	return batches
}

// BenchmarkMLPModelOnly calls the same model directly on pre-made padded
// batches: the limit for BenchmarkMLPEndToEnd.
func BenchmarkMLPModelOnly(b *testing.B) {
	mem := memory.NewGoAllocator()
	ds := benchRecords(b, mem)
	padder, err := pad.New(mem, ds.Schema(), benchBatch)
	if err != nil {
		b.Fatal(err)
	}
	defer padder.Release()
	batches := premade(b, mem, ds, padder)
	model := benchModel(b)
	ctx := context.Background()
	start := arrowtest.Mallocs()
	for b.Loop() {
		sess, err := model.Start(ctx, device.SessionConfig{BatchSize: benchBatch, Replicas: 1, Schema: padder.Schema(), Allocator: mem})
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range batches {
			out, err := sess.Predict(ctx, batch)
			if err != nil {
				b.Fatal(err)
			}
			out.Release()
		}
		if err := sess.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
	arrowtest.ReportPerBatch(b, benchRows, len(batches), start)
}

// BenchmarkMLPReplicas compares 1 and 2 replicas of the pure-Go MLP on the
// end-to-end workload. One replica runs with gonum's own parallel products
// and serially; replicas are always serial.
func BenchmarkMLPReplicas(b *testing.B) {
	mem := memory.NewGoAllocator()
	ds := benchRecords(b, mem)
	for _, c := range []struct {
		replicas int
		serial   bool
	}{{1, false}, {1, true}, {2, true}} {
		b.Run(fmt.Sprintf("replicas=%d/serial=%t", c.replicas, c.serial), func(b *testing.B) {
			model := benchModel(b)
			model.Serial = c.serial
			p, err := predict.New(model, predict.WithBatchSize(benchBatch), predict.WithReplicas(c.replicas), predict.WithAllocator(mem))
			if err != nil {
				b.Fatal(err)
			}
			benchAll(b, p, ds)
		})
	}
}

// BenchmarkBucketPadding runs datasets of 10 full batches of 256 and a short
// tail, padding the tail to the full batch or only to the smallest of
// {16, 64, 256} that holds it, and reports the padded rows per run.
func BenchmarkBucketPadding(b *testing.B) {
	mem := memory.NewGoAllocator()
	for _, tail := range []int{5, 40, 100} {
		rows := 10*benchBatch + tail
		ds := dataset.UniformTensors(mem, rows, benchWidth, 4096, 1)
		for _, buckets := range [][]int{nil, {16, 64, 256}} {
			b.Run(fmt.Sprintf("tail=%d/buckets=%v", tail, buckets), func(b *testing.B) {
				opts := []predict.Option{predict.WithBatchSize(benchBatch), predict.WithAllocator(mem)}
				if buckets != nil {
					opts = append(opts, predict.WithBatchSizes(buckets...))
				}
				var stats predict.Stats
				opts = append(opts, predict.WithStats(func(s predict.Stats) { stats = s }))
				p, err := predict.New(benchModel(b), opts...)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					for _, err := range p.All(context.Background(), ds) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(stats.PaddedRows), "padded-rows")
				b.ReportMetric(stats.PaddingWaste(), "waste")
			})
		}
	}
}
