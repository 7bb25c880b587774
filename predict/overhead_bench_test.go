package predict_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
)

// constModel answers every batch with one record made at Start: a model
// that costs nothing, so what a benchmark of it measures is the pipeline.
type constModel struct{}

type constSession struct{ out arrow.RecordBatch }

var constSchema = arrow.NewSchema([]arrow.Field{{Name: "y", Type: arrow.PrimitiveTypes.Float32}}, nil)

func (constModel) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	b := array.NewFloat32Builder(cfg.Allocator)
	defer b.Release()
	b.AppendValues(make([]float32, cfg.BatchSize), nil)
	col := b.NewArray()
	defer col.Release()
	return &constSession{out: array.NewRecordBatch(constSchema, []arrow.Array{col}, int64(cfg.BatchSize))}, nil
}

func (s *constSession) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	if b.Record.NumRows() == s.out.NumRows() {
		s.out.Retain()
		return s.out, nil
	}
	return s.out.NewSlice(0, b.Record.NumRows()), nil
}

func (s *constSession) Shutdown(context.Context) error { s.out.Release(); return nil }

// The pipeline's own cost a batch (ns/batch, allocs/batch): batching
// records of 4,096 rows into 256, padding, the device call, assembling
// the predictions, with a model that costs nothing.
func BenchmarkPipelineOverhead(b *testing.B) {
	mem := memory.NewGoAllocator()
	ds := benchRecords(b, mem)
	p, err := predict.New(constModel{}, predict.WithBatchSize(benchBatch), predict.WithAllocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	batches := (benchRows + benchBatch - 1) / benchBatch
	b.ReportAllocs()
	for b.Loop() {
		for rec, err := range p.All(context.Background(), ds) {
			if err != nil {
				b.Fatal(err)
			}
			_ = rec
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batches), "ns/batch")
}
