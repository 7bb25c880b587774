package eval

import (
	"fmt"
	"math"
	"sort"
)

// LogLoss returns the mean negative log-probability of the true class over
// the "probabilities" column (or Column's), with probabilities clipped to
// [eps, 1-eps] (Clip; 1e-15 by default).
func LogLoss(opts ...Option) *MeanMetric {
	o := configure(ProbabilityColumn, opts)
	column, eps := o.column, o.eps
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
				return nil, &RowError{Row: int64(i), Err: fmt.Errorf("%w: label %d, the model gives %d class probabilities", ErrClasses, l, k)}
			}
			out[i] = -math.Log(min(max(float64(probs[i*k+int(l)]), eps), 1-eps))
		}
		return out, nil
	})
}

// ROCAUCMetric is the exact area under the ROC curve of a binary
// classifier: the probability that a random positive row scores above a
// random negative one, ties counting half. It keeps every (score, label)
// pair, so memory grows with the rows.
type ROCAUCMetric struct {
	// column holds the score: a probabilities column (the positive class's
	// probability is used) or a numeric column.
	column string
	// positive is the positive class; ovr scores one class against the
	// rest of any number of classes.
	positive int
	ovr      bool
	scores   []float64
	labels   []bool
}

// ROCAUC returns an exact ROC AUC over the probability of class 1 in the
// "probabilities" column, or over the scores of a numeric Column. Labels
// must be 0 or 1 (or bool).
func ROCAUC(opts ...Option) *ROCAUCMetric {
	return &ROCAUCMetric{column: configure(ProbabilityColumn, opts).column, positive: 1}
}

// ROCAUCOneVsRest returns the exact ROC AUC of class against the rest, over
// any number of classes: the class's probability in the "probabilities"
// column (or Column's) is the score, its rows are the positives. The macro
// mean of every class's is scikit-learn's roc_auc_score(multi_class="ovr").
func ROCAUCOneVsRest(class int, opts ...Option) *ROCAUCMetric {
	return &ROCAUCMetric{column: configure(ProbabilityColumn, opts).column, positive: class, ovr: true}
}

func (m *ROCAUCMetric) Name() string {
	if m.ovr {
		return fmt.Sprintf("roc_auc_class_%d", m.positive)
	}
	return "roc_auc"
}

func (m *ROCAUCMetric) Update(b *Batch) error {
	labels, err := b.LabelClasses()
	if err != nil {
		return err
	}
	var score func(i int) float64
	if probs, k, err := b.Probabilities(m.column); err == nil {
		switch {
		case m.ovr && m.positive >= k:
			return fmt.Errorf("%w: class %d, column %q has %d class probabilities", ErrClasses, m.positive, m.column, k)
		case !m.ovr && k != 2:
			return fmt.Errorf("%w: ROC AUC needs 2 class probabilities, column %q has %d", ErrClasses, m.column, k)
		}
		score = func(i int) float64 { return float64(probs[k*i+m.positive]) }
	} else if m.ovr {
		return err
	} else if v, verr := b.Values(m.column); verr == nil {
		score = func(i int) float64 { return v[i] }
	} else {
		return err
	}
	for i, l := range labels {
		if !m.ovr && l != 0 && l != 1 {
			return &RowError{Row: int64(i), Err: fmt.Errorf("%w: label %d, ROC AUC needs 0 or 1", ErrClasses, l)}
		}
		m.scores = append(m.scores, score(i))
		m.labels = append(m.labels, int(l) == m.positive)
	}
	return nil
}

func (m *ROCAUCMetric) Merge(other Metric) error {
	o, ok := other.(*ROCAUCMetric)
	if !ok || o.positive != m.positive || o.ovr != m.ovr {
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

// Curve returns the ROC curve: the false and true positive rates at every
// distinct score taken as the threshold, from (0, 0) to (1, 1).
func (m *ROCAUCMetric) Curve() (fpr, tpr []float64) {
	order := make([]int, len(m.scores))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return m.scores[order[a]] > m.scores[order[b]] })
	var pos, neg float64
	for _, l := range m.labels {
		if l {
			pos++
		} else {
			neg++
		}
	}
	fpr, tpr = []float64{0}, []float64{0}
	var tp, fp float64
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && m.scores[order[j]] == m.scores[order[i]] {
			if m.labels[order[j]] {
				tp++
			} else {
				fp++
			}
			j++
		}
		fpr, tpr = append(fpr, ratio(fp, neg)), append(tpr, ratio(tp, pos))
		i = j
	}
	return fpr, tpr
}

func (m *ROCAUCMetric) Reset() {
	m.scores = m.scores[:0]
	m.labels = m.labels[:0]
}
