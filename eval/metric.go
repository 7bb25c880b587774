package eval

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
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

// Default prediction columns, as the cpu device writes them.
const (
	ClassColumn       = "class"
	ProbabilityColumn = "probabilities"
)

func mergeError(m, other Metric) error {
	return fmt.Errorf("%w: %s (%T) with %s (%T)", ErrMerge, m.Name(), m, other.Name(), other)
}

// ---- Accuracy ----

// AccuracyMetric is the fraction of rows whose predicted class is the label.
type AccuracyMetric struct {
	Column         string // predicted class column
	correct, total int64
}

// Accuracy returns an accuracy metric over the "class" column.
func Accuracy() *AccuracyMetric { return &AccuracyMetric{Column: ClassColumn} }

func (m *AccuracyMetric) Name() string { return "accuracy" }

func (m *AccuracyMetric) Update(b *Batch) error {
	labels, pred, err := labelsAndClasses(b, m.Column)
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

func labelsAndClasses(b *Batch, column string) (labels, pred []int64, err error) {
	if labels, err = b.LabelClasses(); err != nil {
		return nil, nil, err
	}
	if pred, err = b.Classes(column); err != nil {
		return nil, nil, err
	}
	return labels, pred, nil
}

// ---- Confusion matrix and the metrics derived from it ----

// ConfusionMetric counts rows by (label, predicted class) over k classes.
// Its Value is the accuracy; Matrix gives the counts.
type ConfusionMetric struct {
	Column string // predicted class column
	k      int
	counts []int64 // k×k, row = label, column = prediction
}

// ConfusionMatrix returns a confusion matrix over classes 0..k-1. A label or
// prediction outside that range is an error wrapping ErrClasses.
func ConfusionMatrix(k int) *ConfusionMetric {
	return &ConfusionMetric{Column: ClassColumn, k: k, counts: make([]int64, k*k)}
}

func (m *ConfusionMetric) Name() string { return "confusion" }

func (m *ConfusionMetric) Update(b *Batch) error {
	labels, pred, err := labelsAndClasses(b, m.Column)
	if err != nil {
		return err
	}
	k := int64(m.k)
	for i, l := range labels {
		p := pred[i]
		if l < 0 || l >= k {
			return fmt.Errorf("%w: row %d: label %d, want 0..%d", ErrClasses, i, l, k-1)
		}
		if p < 0 || p >= k {
			return fmt.Errorf("%w: row %d: predicted class %d, want 0..%d", ErrClasses, i, p, k-1)
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
	ConfusionMetric
	kind scoreKind
	avg  Average
}

// Precision returns precision over k classes.
func Precision(avg Average, k int) *ScoreMetric { return newScore(precision, avg, k) }

// Recall returns recall over k classes.
func Recall(avg Average, k int) *ScoreMetric { return newScore(recall, avg, k) }

// F1 returns the F1 score over k classes.
func F1(avg Average, k int) *ScoreMetric { return newScore(f1, avg, k) }

func newScore(kind scoreKind, avg Average, k int) *ScoreMetric {
	if avg == Binary {
		k = 2
	}
	return &ScoreMetric{ConfusionMetric: *ConfusionMatrix(k), kind: kind, avg: avg}
}

func (m *ScoreMetric) Name() string {
	return [...]string{"precision", "recall", "f1"}[m.kind] + "_" + m.avg.String()
}

func (m *ScoreMetric) Merge(other Metric) error {
	o, ok := other.(*ScoreMetric)
	if !ok || o.kind != m.kind || o.avg != m.avg {
		return mergeError(m, other)
	}
	return m.ConfusionMetric.Merge(&o.ConfusionMetric)
}

func (m *ScoreMetric) Value() float64 {
	if m.avg == Binary {
		return m.classScore(1)
	}
	var sum float64
	n := 0
	for c := range m.k {
		if m.truth(c)+m.predicted(c) == 0 {
			continue // the class never occurs
		}
		sum += m.classScore(c)
		n++
	}
	return ratio(sum, float64(n))
}

func (m *ScoreMetric) classScore(c int) float64 {
	tp := float64(m.Count(c, c))
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
	for p := range m.k {
		n += m.Count(c, p)
	}
	return n
}

func (m *ScoreMetric) predicted(c int) (n int64) {
	for l := range m.k {
		n += m.Count(l, c)
	}
	return n
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// ---- Log loss ----

// LogLoss returns the mean negative log-probability of the true class over
// the "probabilities" column, with probabilities clipped to [1e-15, 1-1e-15].
func LogLoss() *MeanMetric { return LogLossOf(ProbabilityColumn, 1e-15) }

// LogLossOf is LogLoss over the named probabilities column, clipped to
// [eps, 1-eps].
func LogLossOf(column string, eps float64) *MeanMetric {
	return Mean("log_loss", func(b *Batch) ([]float64, error) {
		labels, err := b.LabelClasses()
		if err != nil {
			return nil, err
		}
		probs, k, err := b.Probabilities(column)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(labels))
		for i, l := range labels {
			if l < 0 || int(l) >= k {
				return nil, fmt.Errorf("%w: row %d: label %d, the model gives %d class probabilities", ErrClasses, i, l, k)
			}
			out[i] = -math.Log(min(max(float64(probs[i*k+int(l)]), eps), 1-eps))
		}
		return out, nil
	})
}

// ---- Regression errors and means ----

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

// MSE returns the mean squared error between the prediction column and
// the labels.
func MSE(column string) *MeanMetric {
	return Mean("mse", residuals(column, func(d float64) float64 { return d * d }))
}

// MAE returns the mean absolute error between the prediction column and
// the labels.
func MAE(column string) *MeanMetric {
	return Mean("mae", residuals(column, math.Abs))
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

// ---- ROC AUC ----

// ROCAUCMetric is the exact area under the ROC curve of a binary
// classifier: the probability that a random positive row scores above a
// random negative one, ties counting half. It keeps every (score, label)
// pair, so memory grows with the rows.
type ROCAUCMetric struct {
	// Column holds the score: a probabilities column (the positive class's
	// probability is used) or a numeric column.
	Column string
	scores []float64
	labels []bool
}

// ROCAUC returns an exact ROC AUC over the probability of class 1 in the
// "probabilities" column. Labels must be 0 or 1 (or bool).
func ROCAUC() *ROCAUCMetric { return &ROCAUCMetric{Column: ProbabilityColumn} }

func (m *ROCAUCMetric) Name() string { return "roc_auc" }

func (m *ROCAUCMetric) Update(b *Batch) error {
	labels, err := b.LabelClasses()
	if err != nil {
		return err
	}
	var score func(i int) float64
	if probs, k, err := b.Probabilities(m.Column); err == nil {
		if k != 2 {
			return fmt.Errorf("%w: ROC AUC needs 2 class probabilities, column %q has %d", ErrClasses, m.Column, k)
		}
		score = func(i int) float64 { return float64(probs[2*i+1]) }
	} else if v, verr := b.Values(m.Column); verr == nil {
		score = func(i int) float64 { return v[i] }
	} else {
		return err
	}
	for i, l := range labels {
		if l != 0 && l != 1 {
			return fmt.Errorf("%w: row %d: label %d, ROC AUC needs 0 or 1", ErrClasses, i, l)
		}
		m.scores = append(m.scores, score(i))
		m.labels = append(m.labels, l == 1)
	}
	return nil
}

func (m *ROCAUCMetric) Merge(other Metric) error {
	o, ok := other.(*ROCAUCMetric)
	if !ok {
		return mergeError(m, other)
	}
	m.scores = append(m.scores, o.scores...)
	m.labels = append(m.labels, o.labels...)
	return nil
}

// Value returns the AUC by the rank-sum (Mann–Whitney U) formula, with
// tied scores given their average rank; NaN if either class is absent.
func (m *ROCAUCMetric) Value() float64 {
	n := len(m.scores)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return m.scores[order[a]] < m.scores[order[b]] })
	var pos, rankSum float64
	for i := 0; i < n; {
		j := i
		for j < n && m.scores[order[j]] == m.scores[order[i]] {
			j++
		}
		rank := float64(i+j+1) / 2 // average of ranks i+1..j
		for _, o := range order[i:j] {
			if m.labels[o] {
				pos++
				rankSum += rank
			}
		}
		i = j
	}
	neg := float64(n) - pos
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}

func (m *ROCAUCMetric) Reset() {
	m.scores = m.scores[:0]
	m.labels = m.labels[:0]
}
