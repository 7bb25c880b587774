package sink_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// The writer's cost a row of a job's predictions (key, class, ten
// probabilities) to snappy Parquet on local disk, in records of 4,096 rows,
// on the caller's goroutine and by two encoders (WithEncoders).
func BenchmarkWritePredictions(b *testing.B) {
	for _, encoders := range []int{0, 2} {
		b.Run(fmt.Sprint("encoders=", encoders), func(b *testing.B) { benchmarkWritePredictions(b, encoders) })
	}
}

func benchmarkWritePredictions(b *testing.B, encoders int) {
	const rows, chunk = 1 << 18, 4096
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "class", Type: arrow.PrimitiveTypes.Int64},
		{Name: "probabilities", Type: tensor.Type(10)},
	}, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []arrow.RecordBatch
	for off := 0; off < rows; off += chunk {
		bld := array.NewRecordBuilder(mem, schema)
		for i := range chunk {
			bld.Field(0).(*array.Int64Builder).Append(int64(off + i))
			bld.Field(1).(*array.Int64Builder).Append(rng.Int64N(10))
			fl := bld.Field(2).(*array.FixedSizeListBuilder)
			fl.Append(true)
			for range 10 {
				fl.ValueBuilder().(*array.Float32Builder).Append(rng.Float32())
			}
		}
		recs = append(recs, bld.NewRecordBatch())
		bld.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	dir := b.TempDir()
	b.ResetTimer()
	for range b.N {
		w, err := sink.Create(filepath.Join(dir, "out.parquet"), schema, sink.WithOverwrite(true), sink.WithAllocator(mem), sink.WithEncoders(encoders))
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
}
