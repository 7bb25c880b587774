package predict_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
)

// The prefetch workload: CSV text of an id and 64 float columns, decoded by
// Arrow's CSV reader and gathered into a tensor column (the input side),
// and a serial MLP 64-128-10 (the device side), sized so that both cost
// about the same on this kind of machine.
// Each CSV record holds csvChunk rows, 16 batches: a source that decodes in
// bursts, as CSV chunks and Parquet row groups do.
const (
	csvRows  = 200_000
	csvChunk = 4096
)

func csvDataset(b *testing.B, mem memory.Allocator) *dataset.Dataset {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	names := make([]string, 64)
	var buf bytes.Buffer
	buf.WriteString("id")
	for i := range names {
		names[i] = "f" + strconv.Itoa(i)
		fields = append(fields, arrow.Field{Name: names[i], Type: arrow.PrimitiveTypes.Float32})
		buf.WriteString("," + names[i])
	}
	buf.WriteByte('\n')
	rng := rand.New(rand.NewPCG(1, 1))
	for r := range csvRows {
		buf.WriteString(strconv.Itoa(r))
		for range names {
			buf.WriteByte(',')
			buf.WriteString(strconv.FormatFloat(rng.Float64()*2-1, 'f', 6, 32))
		}
		buf.WriteByte('\n')
	}
	schema := arrow.NewSchema(fields, nil)
	data := buf.Bytes()
	raw := dataset.FromReader(schema, func() (array.RecordReader, error) {
		return csv.NewReader(bytes.NewReader(data), schema, csv.WithHeader(true), csv.WithChunk(csvChunk), csv.WithAllocator(mem)), nil
	})
	ds, err := dataset.Gather(raw, mem, "features", names...)
	if err != nil {
		b.Fatal(err)
	}
	return ds
}

func csvModel(b *testing.B) *cpu.MLP {
	m, err := cpu.NewMLP([]int{64, 128, 10}, cpu.ReLU, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		b.Fatal(err)
	}
	m.Serial = true
	return m
}

// BenchmarkPrefetch measures the input side alone, the device alone, and
// both end to end with prefetch off (in step), shallower than a source
// record (4) and deeper (20).
func BenchmarkPrefetch(b *testing.B) {
	mem := memory.NewGoAllocator()
	ds := csvDataset(b, mem)
	const batch = 256
	batches := (csvRows + batch - 1) / batch
	padder, err := pad.New(mem, ds.Schema(), batch)
	if err != nil {
		b.Fatal(err)
	}
	defer padder.Release()

	b.Run("input-alone", func(b *testing.B) {
		start := arrowtest.Mallocs()
		for b.Loop() {
			for rec, err := range ds.Batches(mem, batch) {
				if err != nil {
					b.Fatal(err)
				}
				padded, _, err := padder.Pad(rec)
				if err != nil {
					b.Fatal(err)
				}
				padded.Release()
			}
		}
		arrowtest.ReportPerBatch(b, csvRows, batches, start)
	})

	b.Run("device-alone", func(b *testing.B) {
		made := premade(b, mem, ds, padder)
		ctx := context.Background()
		start := arrowtest.Mallocs()
		for b.Loop() {
			sess, err := csvModel(b).Start(ctx, device.SessionConfig{BatchSize: batch, Replicas: 1, Schema: padder.Schema(), Allocator: mem})
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range made {
				out, err := sess.Predict(ctx, m)
				if err != nil {
					b.Fatal(err)
				}
				out.Release()
			}
			sess.Shutdown(ctx)
		}
		arrowtest.ReportPerBatch(b, csvRows, batches, start)
	})

	for _, k := range []int{0, 4, 20} {
		b.Run(fmt.Sprintf("end-to-end/prefetch=%d", k), func(b *testing.B) {
			p, err := predict.New(csvModel(b), predict.WithBatchSize(batch), predict.WithPrefetch(k), predict.WithAllocator(mem))
			if err != nil {
				b.Fatal(err)
			}
			start := arrowtest.Mallocs()
			for b.Loop() {
				for r := range p.Predict(context.Background(), ds) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					r.Record.Release()
				}
			}
			arrowtest.ReportPerBatch(b, csvRows, batches, start)
		})
	}
}
