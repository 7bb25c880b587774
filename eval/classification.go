package eval

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// AccuracyMetric is the fraction of rows whose predicted class is the label.
type AccuracyMetric struct {
	column         string // predicted class column
	correct, total int64
}

// Accuracy returns an accuracy metric over the "class" column.
func Accuracy(opts ...Option) *AccuracyMetric {
	return &AccuracyMetric{column: configure(ClassColumn, opts).column}
}

func (m *AccuracyMetric) Name() string { return "accuracy" }

func (m *AccuracyMetric) Update(b *Batch) error {
	labels, pred, err := labelsAndClasses(b, m.column)
	if err != nil {
		return err
	}
	for i, l := range labels {
		if pred[i] == l {
			m.correct++
		}
	}
	m.total += int64(len(labels))
	return nil
}

func (m *AccuracyMetric) Merge(other Metric) error {
	o, ok := other.(*AccuracyMetric)
	if !ok {
		return mergeError(m, other)
	}
	m.correct += o.correct
	m.total += o.total
	return nil
}

func (m *AccuracyMetric) Value() float64 { return ratio(float64(m.correct), float64(m.total)) }
func (m *AccuracyMetric) Reset()         { m.correct, m.total = 0, 0 }

// ---- Confusion matrix and the metrics derived from it ----

// ConfusionMetric counts rows by (label, predicted class) over k classes.
// Its Value is the accuracy; Matrix gives the counts.
type ConfusionMetric struct {
	column string // predicted class column
	k      int
	counts []int64 // k×k, row = label, column = prediction
}

// ConfusionMatrix returns a confusion matrix over classes 0..k-1. A label or
// prediction outside that range is an error wrapping ErrClasses.
func ConfusionMatrix(k int, opts ...Option) *ConfusionMetric {
	return &ConfusionMetric{column: configure(ClassColumn, opts).column, k: k, counts: make([]int64, max(k, 0)*max(k, 0))}
}

func (m *ConfusionMetric) Name() string { return "confusion" }

func (m *ConfusionMetric) Update(b *Batch) error {
	labels, pred, err := labelsAndClasses(b, m.column)
	if err != nil {
		return err
	}
	k := int64(m.k)
	for i, l := range labels {
		p := pred[i]
		if l < 0 || l >= k {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w: label %d, want 0..%d", ErrClasses, l, k-1)}
		}
		if p < 0 || p >= k {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w: predicted class %d, want 0..%d", ErrClasses, p, k-1)}
		}
		m.counts[l*k+p]++
	}
	return nil
}

func (m *ConfusionMetric) Merge(other Metric) error {
	o, ok := other.(*ConfusionMetric)
	if !ok || o.k != m.k {
		return mergeError(m, other)
	}
	for i, c := range o.counts {
		m.counts[i] += c
	}
	return nil
}

// Value returns the accuracy: the diagonal over the total.
func (m *ConfusionMetric) Value() float64 {
	var diag, total int64
	for i, c := range m.counts {
		total += c
		if i/m.k == i%m.k {
			diag += c
		}
	}
	return ratio(float64(diag), float64(total))
}

func (m *ConfusionMetric) Reset() { clear(m.counts) }

// Matrix returns the counts as a k×k matrix: row = label, column = prediction.
func (m *ConfusionMetric) Matrix() *mat.Dense {
	d := mat.NewDense(m.k, m.k, nil)
	for i, c := range m.counts {
		d.Set(i/m.k, i%m.k, float64(c))
	}
	return d
}

// Count returns the number of rows with the given label and prediction.
func (m *ConfusionMetric) Count(label, predicted int) int64 { return m.counts[label*m.k+predicted] }

// Average says how per-class scores combine into one.
type Average int

const (
	// Binary scores the positive class 1 alone (k must be 2).
	Binary Average = iota
	// Macro averages the per-class scores over every class that occurs in
	// the labels or the predictions, each class weighing the same.
	Macro
)

func (a Average) String() string {
	if a == Binary {
		return "binary"
	}
	return "macro"
}

type scoreKind int

const (
	precision scoreKind = iota
	recall
	f1
)

// ScoreMetric is precision, recall or F1, binary or macro-averaged, over a
// confusion matrix. An undefined ratio (no predicted or no true rows of a
// class) counts as 0.
type ScoreMetric struct {
	conf ConfusionMetric
	kind scoreKind
	avg  Average
	err  error // a configuration the metric cannot compute, reported by Update
}

// Precision returns precision over k classes.
func Precision(avg Average, k int, opts ...Option) *ScoreMetric {
	return newScore(precision, avg, k, opts)
}

// Recall returns recall over k classes.
func Recall(avg Average, k int, opts ...Option) *ScoreMetric { return newScore(recall, avg, k, opts) }

// F1 returns the F1 score over k classes.
func F1(avg Average, k int, opts ...Option) *ScoreMetric { return newScore(f1, avg, k, opts) }

func newScore(kind scoreKind, avg Average, k int, opts []Option) *ScoreMetric {
	m := &ScoreMetric{conf: *ConfusionMatrix(k, opts...), kind: kind, avg: avg}
	if avg == Binary && k != 2 {
		m.err = fmt.Errorf("%w: %s: binary averaging is over 2 classes, got k=%d (use Macro)", ErrClasses, m.Name(), k)
	}
	return m
}

// Update adds the rows of one batch.
func (m *ScoreMetric) Update(b *Batch) error {
	if m.err != nil {
		return m.err
	}
	return m.conf.Update(b)
}

// Reset forgets every row.
func (m *ScoreMetric) Reset() { m.conf.Reset() }

func (m *ScoreMetric) Name() string {
	return [...]string{"precision", "recall", "f1"}[m.kind] + "_" + m.avg.String()
}

func (m *ScoreMetric) Merge(other Metric) error {
	o, ok := other.(*ScoreMetric)
	if !ok || o.kind != m.kind || o.avg != m.avg {
		return mergeError(m, other)
	}
	return m.conf.Merge(&o.conf)
}

func (m *ScoreMetric) Value() float64 {
	if m.avg == Binary {
		return m.classScore(1)
	}
	var sum float64
	n := 0
	for c := range m.conf.k {
		if m.truth(c)+m.predicted(c) == 0 {
			continue // the class never occurs
		}
		sum += m.classScore(c)
		n++
	}
	return ratio(sum, float64(n))
}

func (m *ScoreMetric) classScore(c int) float64 {
	tp := float64(m.conf.Count(c, c))
	p := ratio(tp, float64(m.predicted(c)))
	r := ratio(tp, float64(m.truth(c)))
	switch m.kind {
	case precision:
		return p
	case recall:
		return r
	}
	return ratio(2*p*r, p+r)
}

// truth returns the number of rows labelled c; predicted, predicted as c.
func (m *ScoreMetric) truth(c int) (n int64) {
	for p := range m.conf.k {
		n += m.conf.Count(c, p)
	}
	return n
}

func (m *ScoreMetric) predicted(c int) (n int64) {
	for l := range m.conf.k {
		n += m.conf.Count(l, c)
	}
	return n
}
