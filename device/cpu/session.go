package cpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"gonum.org/v1/gonum/blas"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/finite"
	"github.com/drainpipe/drainpipe/tensor"
)

var _ device.Model = (*MLP)(nil)

// OutputSchema returns the schema of the model's predictions.
func (m *MLP) OutputSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "class", Type: arrow.PrimitiveTypes.Int64},
		{Name: "probabilities", Type: tensor.Type(m.Classes())},
	}, nil)
}

// Start validates the model against the batch schema and allocates the
// session's scratch matrices.
func (m *MLP) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	name := m.feature()
	idx := cfg.Schema.FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("cpu: feature column %q: not in the input schema", name)
	}
	width, err := tensor.Width(cfg.Schema.Field(idx[0]).Type)
	if err != nil {
		return nil, fmt.Errorf("cpu: feature column %q: %w", name, err)
	}
	if width != 0 && width != m.InputSize() {
		return nil, fmt.Errorf("cpu: feature column %q: %w: %d values per row, model input size %d", name, tensor.ErrWidth, width, m.InputSize())
	}
	s := &session{m: m, impl: m.blas(), rows: cfg.BatchSize, col: idx[0], mem: cfg.Allocator, schema: m.OutputSchema()}
	if m.Serial || cfg.Replicas > 1 || cfg.Sessions > 1 {
		s.tile = serially(s.impl)
	}
	if s.mem == nil {
		s.mem = memory.DefaultAllocator
	}
	for _, l := range m.Layers[:len(m.Layers)-1] {
		s.hidden = append(s.hidden, make([]float32, cfg.BatchSize*l.Out))
	}
	return s, nil
}

type session struct {
	m      *MLP
	impl   blas.Float32
	tile   bool // one of several sessions, on a BLAS that fans out: products in tiles
	rows   int
	col    int
	mem    memory.Allocator
	schema *arrow.Schema
	hidden [][]float32 // one rows×Out matrix per hidden layer
}

func (s *session) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	rows := int(b.Record.NumRows())
	if rows > s.rows {
		return nil, fmt.Errorf("cpu: batch of %d rows, session batch size %d", rows, s.rows)
	}
	col := b.Record.Column(s.col)
	live := rows
	if _, ok := col.(array.ListLike); ok && col.DataType().ID() != arrow.FIXED_SIZE_LIST {
		// Padding rows of a list column are empty lists, not d zeros: run
		// the real rows only and give the padding rows zero outputs.
		live = b.Rows()
		col = array.NewSlice(col, 0, int64(live))
		defer col.Release()
	}
	x, err := tensor.Float32(col, s.m.InputSize())
	if err != nil {
		err = fmt.Errorf("cpu: feature column %q: %w", s.m.feature(), err)
		var te *tensor.RowError
		if errors.As(err, &te) {
			return nil, &device.RowError{Row: int64(te.Row), Column: s.m.feature(), Err: err}
		}
		return nil, err
	}
	if !s.m.AllowNonFinite {
		if i := finite.Index32(x[:live*s.m.InputSize()]); i >= 0 {
			row := i / s.m.InputSize()
			j := i % s.m.InputSize()
			return nil, &device.RowError{Row: int64(row), Column: s.m.feature(),
				Err: &device.ValueError{Index: j, Err: fmt.Errorf("%w: value %d is %v", ErrNonFinite, j, x[i])}}
		}
	}
	return s.forward(x, live, rows), nil
}

// forward runs the model over the first live rows of x and returns the
// output record of rows rows, those after live zero.
func (s *session) forward(x []float32, live, rows int) arrow.RecordBatch {
	for i, h := range s.hidden {
		s.m.Layers[i].forward(s.impl, s.tile, x, live, h[:live*s.m.Layers[i].Out])
		x = h
	}
	last := &s.m.Layers[len(s.m.Layers)-1]
	k := last.Out
	probBuf, probs := tensor.NewBuffer(s.mem, rows*k)
	last.forward(s.impl, s.tile, x, live, probs[:live*k])
	clear(probs[live*k:])

	classBuf := memory.NewResizableBuffer(s.mem)
	classBuf.Resize(rows * arrow.Int64SizeBytes)
	classes := arrow.Int64Traits.CastFromBytes(classBuf.Bytes())
	for r := range rows {
		classes[r] = int64(argmax(probs[r*k : (r+1)*k]))
	}
	classData := array.NewData(arrow.PrimitiveTypes.Int64, rows, []*memory.Buffer{nil, classBuf}, nil, 0, 0)
	classArr := array.NewInt64Data(classData)
	classData.Release()
	classBuf.Release()
	probArr := tensor.NewFixedSizeList(probBuf, rows, k)
	defer classArr.Release()
	defer probArr.Release()
	return array.NewRecordBatch(s.schema, []arrow.Array{classArr, probArr}, int64(rows))
}

func (s *session) Shutdown(context.Context) error {
	s.hidden = nil
	return nil
}
