package main

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/device"
)

// renamedOutput is a model with one output column renamed: eval's label
// column and a model's output of the same name (a classifier's "label")
// would otherwise clash after the model has run.
type renamedOutput struct {
	device.Model
	schema *arrow.Schema
}

// renameClash returns m with its output named name renamed to
// "predicted_" + name, or m if it has none.
func renameClash(m device.Model, name string) (device.Model, error) {
	os, ok := m.(device.OutputSchemaer)
	if !ok {
		return m, nil
	}
	schema := os.OutputSchema()
	idx := schema.FieldIndices(name)
	if len(idx) == 0 {
		return m, nil
	}
	fields := schema.Fields()
	fields[idx[0]].Name = "predicted_" + name
	out := arrow.NewSchema(fields, nil)
	if len(out.FieldIndices(fields[idx[0]].Name)) != 1 {
		return nil, fmt.Errorf("the model's output %q clashes with the label column, and %q is taken", name, fields[idx[0]].Name)
	}
	return &renamedOutput{Model: m, schema: out}, nil
}

func (r *renamedOutput) OutputSchema() *arrow.Schema { return r.schema }

func (r *renamedOutput) ShortBatches() bool {
	sb, ok := r.Model.(device.ShortBatcher)
	return ok && sb.ShortBatches()
}

func (r *renamedOutput) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := r.Model.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &renamedSession{Session: s, schema: r.schema}, nil
}

type renamedSession struct {
	device.Session
	schema *arrow.Schema
}

func (s *renamedSession) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	rec, err := s.Session.Predict(ctx, b)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	if rec.NumCols() != int64(s.schema.NumFields()) {
		return nil, fmt.Errorf("the model gave %d columns, it states %d", rec.NumCols(), s.schema.NumFields())
	}
	return array.NewRecordBatch(s.schema, rec.Columns(), rec.NumRows()), nil
}
