package eval

import (
	"fmt"
	"math"
)

// MeanMetric is the mean of a per-row value.
type MeanMetric struct {
	name  string
	value func(b *Batch) ([]float64, error)
	sum   float64
	n     int64
}

// Mean returns the mean of the per-row values fn computes for each batch,
// reported under name.
func Mean(name string, fn func(b *Batch) ([]float64, error)) *MeanMetric {
	return &MeanMetric{name: name, value: fn}
}

// MSE returns the mean squared error between the "value" column (or
// Column's) and the labels.
func MSE(opts ...Option) *MeanMetric {
	return Mean("mse", residuals(configure(ValueColumn, opts).column, func(d float64) float64 { return d * d }))
}

// MAE returns the mean absolute error between the "value" column (or
// Column's) and the labels.
func MAE(opts ...Option) *MeanMetric {
	return Mean("mae", residuals(configure(ValueColumn, opts).column, math.Abs))
}

func residuals(column string, f func(float64) float64) func(b *Batch) ([]float64, error) {
	return func(b *Batch) ([]float64, error) {
		labels, err := b.LabelValues()
		if err != nil {
			return nil, err
		}
		pred, err := b.Values(column)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(labels))
		for i, l := range labels {
			out[i] = f(pred[i] - l)
		}
		return out, nil
	}
}

func (m *MeanMetric) Name() string { return m.name }

func (m *MeanMetric) Update(b *Batch) error {
	v, err := m.value(b)
	if err != nil {
		return err
	}
	if len(v) != b.Rows() {
		return fmt.Errorf("eval: %s: %d values for %d rows", m.name, len(v), b.Rows())
	}
	for _, x := range v {
		m.sum += x
	}
	m.n += int64(len(v))
	return nil
}

func (m *MeanMetric) Merge(other Metric) error {
	o, ok := other.(*MeanMetric)
	if !ok || o.name != m.name {
		return mergeError(m, other)
	}
	m.sum += o.sum
	m.n += o.n
	return nil
}

func (m *MeanMetric) Value() float64 { return ratio(m.sum, float64(m.n)) }
func (m *MeanMetric) Reset()         { m.sum, m.n = 0, 0 }
