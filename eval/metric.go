package eval

import (
	"fmt"
)

// Metric is a streaming accumulator over evaluated batches.
type Metric interface {
	// Name is the key of the metric's value in a Report.
	Name() string
	// Update adds the rows of one batch.
	Update(b *Batch) error
	// Merge adds the rows another accumulator of the same kind has seen.
	Merge(other Metric) error
	// Value returns the metric over every row added so far.
	Value() float64
	// Reset forgets every row.
	Reset()
}

// Default prediction columns: the first two as the cpu device writes them.
const (
	ClassColumn       = "class"
	ProbabilityColumn = "probabilities"
	ValueColumn       = "value" // a regression model's prediction
)

// Option configures a metric.
type Option func(*options)

type options struct {
	column string
	eps    float64
}

// Column names the prediction column a metric reads, instead of its
// default (ClassColumn, ProbabilityColumn or ValueColumn).
func Column(name string) Option { return func(o *options) { o.column = name } }

// Clip sets how far from 0 and 1 LogLoss clips probabilities (default
// 1e-15).
func Clip(eps float64) Option { return func(o *options) { o.eps = eps } }

func configure(column string, opts []Option) options {
	o := options{column: column, eps: 1e-15}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func mergeError(m, other Metric) error {
	return fmt.Errorf("%w: %s (%T) with %s (%T)", ErrMerge, m.Name(), m, other.Name(), other)
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func labelsAndClasses(b *Batch, column string) (labels, pred []int64, err error) {
	if labels, err = b.LabelClasses(); err != nil {
		return nil, nil, err
	}
	if pred, err = b.Classes(column); err != nil {
		return nil, nil, err
	}
	return labels, pred, nil
}
