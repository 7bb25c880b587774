package eval_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/predict"
)

func TestMergeEqualsWhole(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const k = 2
	whole := metricsFor(k)
	if _, err := eval.Evaluate(t.Context(), classifier{k}, labelledDataset(mem, 60, k), "label", whole, predict.WithBatchSize(8), predict.WithAllocator(mem)); err != nil {
		t.Fatal(err)
	}
	// Two shards: even and odd records of 10 rows.
	shard := func(i int) *dataset.Dataset {
		all := labelledDataset(mem, 60, k)
		return dataset.New(labelled, func(yield func(arrow.RecordBatch, error) bool) {
			n := 0
			for rec, err := range all.Records() {
				if err != nil || n%2 == i {
					if !yield(rec, err) {
						return
					}
				}
				n++
			}
		})
	}
	a, b := metricsFor(k), metricsFor(k)
	for i, ms := range [][]eval.Metric{a, b} {
		if _, err := eval.Evaluate(t.Context(), classifier{k}, shard(i), "label", ms, predict.WithBatchSize(8), predict.WithAllocator(mem)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range a {
		if err := a[i].Merge(b[i]); err != nil {
			t.Fatal(err)
		}
		if !closeTo(a[i].Value(), whole[i].Value()) {
			t.Errorf("%s: merged %v, whole %v", a[i].Name(), a[i].Value(), whole[i].Value())
		}
	}
	if err := a[0].Merge(a[2]); !errors.Is(err, eval.ErrMerge) {
		t.Fatalf("merging accuracy with log loss: err %v", err)
	}
}

func TestMeanOfAnyValue(t *testing.T) {
	mem := arrowtest.Allocator(t)
	maxProb := eval.Mean("max_prob", func(b *eval.Batch) ([]float64, error) {
		p, k, err := b.Probabilities("probabilities")
		if err != nil {
			return nil, err
		}
		out := make([]float64, b.Rows())
		for i := range out {
			for _, v := range p[i*k : (i+1)*k] {
				out[i] = math.Max(out[i], float64(v))
			}
		}
		return out, nil
	})
	report, err := eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 19, 3), "label", []eval.Metric{maxProb}, predict.WithBatchSize(8), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i := range 19 {
		m := 0.0
		for _, v := range realProbs(int64(i), 3) {
			m = math.Max(m, float64(v))
		}
		sum += m
	}
	if got := report.Values["max_prob"]; !closeTo(got, sum/19) {
		t.Fatalf("max_prob %v, want %v (padding rows have max 1 and must not count)", got, sum/19)
	}
}

func TestBadLabels(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ds := labelledDataset(mem, 20, 3)
	opts := []predict.Option{predict.WithBatchSize(8), predict.WithAllocator(mem)}
	_, err := eval.Evaluate(t.Context(), classifier{3}, ds, "y", []eval.Metric{eval.Accuracy()}, opts...)
	if !errors.Is(err, eval.ErrLabel) || !strings.Contains(err.Error(), `no column "y"`) {
		t.Errorf("missing label: err %v", err)
	}

	strs := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "label", Type: arrow.BinaryTypes.String}}, nil)
	_, err = eval.Evaluate(t.Context(), classifier{3}, dataset.FromRecords(strs), "label", []eval.Metric{eval.Accuracy()}, opts...)
	if !errors.Is(err, eval.ErrLabel) || !strings.Contains(err.Error(), "type utf8") {
		t.Errorf("string label: err %v", err)
	}

	floats := labelledDataset(mem, 20, 3)
	_, err = eval.Evaluate(t.Context(), classifier{3}, floats, "target", []eval.Metric{eval.Accuracy()}, opts...)
	if !errors.Is(err, eval.ErrLabel) || !strings.Contains(err.Error(), "want an integer") {
		t.Errorf("float label for accuracy: err %v", err)
	}

	withNull := dataset.Generate(mem, labelled, 20, 20, func(b *array.RecordBuilder, start, n int) {
		for i := range n {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if i == 13 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Int32Builder).Append(1)
			}
			b.Field(2).(*array.Float64Builder).Append(0)
		}
	})
	_, err = eval.Evaluate(t.Context(), classifier{3}, withNull, "label", []eval.Metric{eval.Accuracy()}, opts...)
	if !errors.Is(err, eval.ErrLabel) || !strings.Contains(err.Error(), `row 13, column "label": null`) {
		t.Errorf("null label: err %v", err)
	}
	if row := (*eval.RowError)(nil); !errors.As(err, &row) || row.Row != 13 {
		t.Errorf("null label: err %v", err)
	}

	// Labels of 3 classes against a model of 2, and a confusion matrix of 2.
	for _, m := range []eval.Metric{eval.LogLoss(), eval.ConfusionMatrix(2), eval.ROCAUC()} {
		_, err = eval.Evaluate(t.Context(), classifier{2}, labelledDataset(mem, 20, 3), "label", []eval.Metric{m}, opts...)
		if !errors.Is(err, eval.ErrClasses) {
			t.Errorf("%s with 3 label classes: err %v", m.Name(), err)
		}
	}
	_, err = eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 20, 3), "label", []eval.Metric{eval.ROCAUC()}, opts...)
	if !errors.Is(err, eval.ErrClasses) || !strings.Contains(err.Error(), "needs 2 class probabilities") {
		t.Errorf("ROC AUC of 3 classes: err %v", err)
	}
	// Binary averaging over 10 classes is an error, not 2 classes quietly.
	_, err = eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 20, 3), "label", []eval.Metric{eval.F1(eval.Binary, 10)}, opts...)
	if !errors.Is(err, eval.ErrClasses) || !strings.Contains(err.Error(), "binary averaging is over 2 classes, got k=10") {
		t.Errorf("F1(Binary, 10): err %v", err)
	}
	// Column chooses the column of any metric.
	_, err = eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 20, 3), "label",
		[]eval.Metric{eval.Accuracy(eval.Column("predicted")), eval.LogLoss(eval.Column("p"), eval.Clip(1e-6))}, opts...)
	if err == nil || !strings.Contains(err.Error(), `"predicted"`) {
		t.Errorf("a column the model does not write: err %v", err)
	}
}

// The ROC curve runs from (0, 0) to (1, 1) through (0, 1) when every
// positive scores above every negative.
func TestROCCurve(t *testing.T) {
	mem := arrowtest.Allocator(t)
	roc := eval.ROCAUC()
	_, err := eval.Evaluate(t.Context(), classifier{2}, labelledDataset(mem, 40, 2), "label", []eval.Metric{roc}, predict.WithBatchSize(8), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	fpr, tpr := roc.Curve()
	n := len(fpr)
	if n < 2 || fpr[0] != 0 || tpr[0] != 0 || fpr[n-1] != 1 || tpr[n-1] != 1 {
		t.Fatalf("curve ends: (%v, %v) … (%v, %v)", fpr[0], tpr[0], fpr[n-1], tpr[n-1])
	}
	for i := 1; i < n; i++ {
		if fpr[i] < fpr[i-1] || tpr[i] < tpr[i-1] {
			t.Fatalf("not monotone at %d", i)
		}
	}
	// The area under the steps equals the metric's AUC (no ties here).
	var area float64
	for i := 1; i < n; i++ {
		area += (fpr[i] - fpr[i-1]) * (tpr[i] + tpr[i-1]) / 2
	}
	if !closeTo(area, roc.Value()) {
		t.Fatalf("area %v, AUC %v", area, roc.Value())
	}
}

// One-vs-rest ROC AUC: over two classes, class 1 against the rest is the
// binary ROC AUC, and so is class 0's (its score and its positives both
// flip);
// over three classes each class has its own; a class past the model's is
// an error.
func TestROCAUCOneVsRest(t *testing.T) {
	mem := arrowtest.Allocator(t)
	opts := []predict.Option{predict.WithBatchSize(8), predict.WithAllocator(mem)}
	binary, c0, c1 := eval.ROCAUC(), eval.ROCAUCOneVsRest(0), eval.ROCAUCOneVsRest(1)
	if _, err := eval.Evaluate(t.Context(), classifier{2}, labelledDataset(mem, 60, 2), "label", []eval.Metric{binary, c0, c1}, opts...); err != nil {
		t.Fatal(err)
	}
	if !closeTo(c1.Value(), binary.Value()) || !closeTo(c0.Value(), binary.Value()) || c1.Name() != "roc_auc_class_1" {
		t.Fatalf("two classes: binary %v, class 1 %v, class 0 %v", binary.Value(), c1.Value(), c0.Value())
	}
	var ovr []eval.Metric
	for c := range 3 {
		ovr = append(ovr, eval.ROCAUCOneVsRest(c))
	}
	report, err := eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 60, 3), "label", ovr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		if v := report.Values[fmt.Sprintf("roc_auc_class_%d", c)]; !(v >= 0 && v <= 1) {
			t.Fatalf("class %d: %v", c, v)
		}
	}
	if _, err := eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, 20, 3), "label", []eval.Metric{eval.ROCAUCOneVsRest(3)}, opts...); !errors.Is(err, eval.ErrClasses) {
		t.Fatalf("class 3 of 3: %v", err)
	}
}
