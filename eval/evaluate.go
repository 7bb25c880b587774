package eval

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
)

// Report is the outcome of an evaluation.
type Report struct {
	// Rows is the number of rows every metric counted: the dataset's rows.
	Rows int64
	// Values maps each metric's name to its value.
	Values map[string]float64
}

// Evaluate runs model over ds, as a Predictor built with opts would
// (batch size, replicas, allowed sizes, prefetch, hooks), and feeds the
// labels in column label and the predictions of the real rows to every
// metric. The metrics are Reset first. Padding rows never reach a metric.
func Evaluate(ctx context.Context, model device.Model, ds *dataset.Dataset, label string, metrics []Metric, opts ...predict.Option) (*Report, error) {
	idx := ds.Schema().FieldIndices(label)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: no column %q in the dataset %s", ErrLabel, label, ds.Schema())
	}
	if err := checkValueType(ds.Schema().Field(idx[0]).Type); err != nil {
		return nil, fmt.Errorf("%w: column %q: %w", ErrLabel, label, err)
	}
	e, err := NewEvaluation(label, metrics)
	if err != nil {
		return nil, err
	}
	// The label travels with the predictions, first, and padding is dropped.
	opts = append(opts[:len(opts):len(opts)], predict.WithPassthrough(label), predict.WithPadding(false))
	p, err := predict.New(model, opts...)
	if err != nil {
		return nil, err
	}
	for rec, err := range p.All(ctx, ds) {
		if err != nil {
			return nil, err
		}
		start := e.rows
		if err := e.Update(rec); err != nil {
			if row := (*RowError)(nil); errors.As(err, &row) {
				err = &RowError{Row: start + row.Row, Column: label, Err: err}
			}
			return nil, err
		}
	}
	return e.Report(), nil
}

// Evaluation feeds metrics record by record, for a caller that runs the
// model itself (a job that sets bad rows aside, say); Evaluate is one fed
// by a Predictor.
type Evaluation struct {
	label    string
	metrics  []Metric
	labelCol int
	batch    int
	rows     int64
}

// NewEvaluation returns an evaluation of the labels in column label by
// metrics, which it Resets.
func NewEvaluation(label string, metrics []Metric) (*Evaluation, error) {
	names := map[string]bool{}
	for _, m := range metrics {
		if names[m.Name()] {
			return nil, fmt.Errorf("eval: two metrics named %q", m.Name())
		}
		names[m.Name()] = true
		m.Reset()
	}
	return &Evaluation{label: label, metrics: metrics, labelCol: -1}, nil
}

// Update feeds every metric the predictions of rec's rows (padding left
// out) and their labels, rec's label column. An error about one row is a
// *RowError whose Row counts within rec.
func (e *Evaluation) Update(rec arrow.RecordBatch) error {
	if e.labelCol < 0 {
		idx := rec.Schema().FieldIndices(e.label)
		if len(idx) != 1 {
			return fmt.Errorf("%w: no column %q in the predictions %s", ErrLabel, e.label, rec.Schema())
		}
		if err := checkValueType(rec.Schema().Field(idx[0]).Type); err != nil {
			return fmt.Errorf("%w: column %q: %w", ErrLabel, e.label, err)
		}
		e.labelCol = idx[0]
	}
	b := &Batch{Index: e.batch, Labels: rec.Column(e.labelCol), Predictions: rec}
	for _, m := range e.metrics {
		if err := m.Update(b); err != nil {
			err = fmt.Errorf("eval: batch %d (rows from %d): %s: %w", e.batch, e.rows, m.Name(), err)
			if row := (*RowError)(nil); errors.As(err, &row) {
				err = &RowError{Row: row.Row, Column: e.label, Err: err}
			}
			return err
		}
	}
	e.rows += rec.NumRows()
	e.batch++
	return nil
}

// Report returns the metrics' values over the rows fed so far.
func (e *Evaluation) Report() *Report {
	r := &Report{Rows: e.rows, Values: map[string]float64{}}
	for _, m := range e.metrics {
		r.Values[m.Name()] = m.Value()
	}
	return r
}
