package main

import (
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"gonum.org/v1/gonum/blas"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/tensor"
)

// rowSum is the trivial model of the pipeline workload: the sum of each
// row's features.
type rowSum struct{}

var sumSchema = arrow.NewSchema([]arrow.Field{{Name: "sum", Type: arrow.PrimitiveTypes.Float32}}, nil)

func (rowSum) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	col := cfg.Schema.FieldIndices("features")
	if len(col) != 1 {
		return nil, errors.New("rowSum: no features column")
	}
	return &rowSumSession{col: col[0], mem: cfg.Allocator}, nil
}

type rowSumSession struct {
	col int
	mem memory.Allocator
}

func (s *rowSumSession) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	rows := int(b.Record.NumRows())
	x, err := tensor.Float32(b.Record.Column(s.col), width)
	if err != nil {
		return nil, err
	}
	buf := memory.NewResizableBuffer(s.mem)
	buf.Resize(rows * arrow.Float32SizeBytes)
	sums := arrow.Float32Traits.CastFromBytes(buf.Bytes())
	sumRows(x, sums)
	data := array.NewData(arrow.PrimitiveTypes.Float32, rows, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	col := array.NewFloat32Data(data)
	data.Release()
	defer col.Release()
	return array.NewRecordBatch(sumSchema, []arrow.Array{col}, int64(rows)), nil
}

func (*rowSumSession) Shutdown(context.Context) error { return nil }

func sumRows(x, out []float32) {
	for r := range out {
		var s float32
		for _, v := range x[r*width : (r+1)*width] {
			s += v
		}
		out[r] = s
	}
}

// handMLP is what a Go user writes without drainpipe: gonum products on
// the model's weights, one slice of rows at a time.
type handMLP struct {
	m       *cpu.MLP
	impl    blas.Float32
	scratch [][]float32
}

func newHandMLP(m *cpu.MLP, batch int) *handMLP {
	h := &handMLP{m: m, impl: cpu.DefaultBLAS()}
	for _, l := range m.Layers {
		h.scratch = append(h.scratch, make([]float32, batch*l.Out))
	}
	return h
}

func (h *handMLP) forward(x []float32, rows int) []float32 {
	for i, l := range h.m.Layers {
		y := h.scratch[i][:rows*l.Out]
		h.impl.Sgemm(blas.NoTrans, blas.NoTrans, rows, l.Out, l.In, 1, x, l.In, l.Weights, l.Out, 0, y, l.Out)
		for r := range rows {
			row := y[r*l.Out : (r+1)*l.Out]
			for j := range row {
				row[j] += l.Bias[j]
			}
			if l.Activation == cpu.ReLU {
				for j, v := range row {
					row[j] = max(v, 0)
				}
			} else {
				top := row[0]
				for _, v := range row {
					top = max(top, v)
				}
				var sum float32
				for j, v := range row {
					row[j] = float32(math.Exp(float64(v - top)))
					sum += row[j]
				}
				for j := range row {
					row[j] /= sum
				}
			}
		}
		x = y
	}
	return x
}

// handLoop runs the workload with a plain loop over the records: slices
// of batch rows, and each record's short tail as a smaller batch.
func (c *config) handLoop(workload string, model device.Model, source string, recs []arrow.RecordBatch) float64 {
	var step func(x []float32, rows int)
	if workload == "pipeline" {
		sums := make([]float32, c.batch)
		step = func(x []float32, rows int) { sumRows(x, sums[:rows]) }
	} else {
		h := newHandMLP(model.(*cpu.MLP), c.batch)
		step = func(x []float32, rows int) { h.forward(x, rows) }
	}
	each := func(rec arrow.RecordBatch) {
		fl := rec.Column(1).(*array.FixedSizeList)
		all := fl.ListValues().(*array.Float32).Float32Values()[fl.Offset()*width:]
		n := int(rec.NumRows())
		for off := 0; off < n; off += c.batch {
			rows := min(c.batch, n-off)
			step(all[off*width:(off+rows)*width], rows)
		}
	}
	start := time.Now()
	if source == "memory" {
		for _, rec := range recs {
			each(rec)
		}
		return time.Since(start).Seconds()
	}
	readPqarrow(filepath.Join(c.dir, "input.parquet"), 1<<16, c.mem, each)
	return time.Since(start).Seconds()
}

// readPqarrow reads a Parquet file with pqarrow alone, in records of
// batchRows rows: the bare read the dataset package is measured against.
func readPqarrow(path string, batchRows int64, mem memory.Allocator, each func(arrow.RecordBatch)) {
	pf, err := file.OpenParquetFile(path, false)
	check(err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batchRows}, mem)
	check(err)
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	check(err)
	defer rr.Release()
	for rr.Next() {
		each(rr.RecordBatch())
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		check(err)
	}
}
