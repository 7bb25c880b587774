package eval

import (
	"context"
	"errors"
	"fmt"

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
	names := map[string]bool{}
	for _, m := range metrics {
		if names[m.Name()] {
			return nil, fmt.Errorf("eval: two metrics named %q", m.Name())
		}
		names[m.Name()] = true
		m.Reset()
	}
	// The label travels with the predictions, first, and padding is dropped.
	opts = append(opts[:len(opts):len(opts)], predict.WithPassthrough(label), predict.WithPadding(false))
	p, err := predict.New(model, opts...)
	if err != nil {
		return nil, err
	}
	report := &Report{Values: map[string]float64{}}
	labelCol, batch := -1, 0
	for rec, err := range p.All(ctx, ds) {
		if err != nil {
			return nil, err
		}
		if labelCol < 0 {
			labelCol = rec.Schema().FieldIndices(label)[0]
		}
		b := &Batch{Index: batch, Labels: rec.Column(labelCol), Predictions: rec}
		for _, m := range metrics {
			if err := m.Update(b); err != nil {
				err = fmt.Errorf("eval: batch %d (dataset rows from %d): %s: %w", batch, report.Rows, m.Name(), err)
				if row := (*RowError)(nil); errors.As(err, &row) {
					err = &RowError{Row: report.Rows + row.Row, Column: label, Err: err}
				}
				return nil, err
			}
		}
		report.Rows += rec.NumRows()
		batch++
	}
	for _, m := range metrics {
		report.Values[m.Name()] = m.Value()
	}
	return report, nil
}
