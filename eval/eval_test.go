package eval_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

// classifier is a fake model over k classes. Real rows get predictions
// derived from their id; padding rows get adversarial ones that would
// change every metric if they were counted (padding labels are 0).
type classifier struct{ k int }

func (c classifier) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	return &classifierSession{k: c.k, mem: cfg.Allocator}, nil
}

type classifierSession struct {
	k   int
	mem memory.Allocator
}

func realClass(id int64, k int) int64 { return (id*5 + 1) % int64(k) }

func realProbs(id int64, k int) []float32 {
	p := make([]float32, k)
	var sum float32
	for j := range p {
		p[j] = float32(1 + (id+int64(j))*7%11)
		sum += p[j]
	}
	for j := range p {
		p[j] /= sum
	}
	return p
}

func realValue(id int64) float64 { return float64(id)*0.5 + 1 }

func (s *classifierSession) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	schema := b.Record.Schema()
	ids := b.Record.Column(schema.FieldIndices("id")[0]).(*array.Int64)
	flags := b.Record.Column(schema.FieldIndices(pad.Column)[0]).(*array.Boolean)
	n := ids.Len()
	classes := array.NewInt64Builder(s.mem)
	defer classes.Release()
	values := array.NewFloat64Builder(s.mem)
	defer values.Release()
	buf, probs := tensor.NewBuffer(s.mem, n*s.k)
	for i := range n {
		row := probs[i*s.k : (i+1)*s.k]
		if flags.Value(i) {
			classes.Append(0)
			values.Append(0)
			clear(row)
			row[0] = 1
			continue
		}
		id := ids.Value(i)
		classes.Append(realClass(id, s.k))
		values.Append(realValue(id))
		copy(row, realProbs(id, s.k))
	}
	c, v := classes.NewArray(), values.NewArray()
	defer c.Release()
	defer v.Release()
	p := tensor.NewFixedSizeList(buf, n, s.k)
	defer p.Release()
	out := arrow.NewSchema([]arrow.Field{
		{Name: "class", Type: c.DataType()}, {Name: "probabilities", Type: p.DataType()}, {Name: "value", Type: v.DataType()},
	}, nil)
	return array.NewRecordBatch(out, []arrow.Array{c, p, v}, int64(n)), nil
}

func (s *classifierSession) Shutdown(context.Context) error { return nil }

var labelled = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "label", Type: arrow.PrimitiveTypes.Int32},
	{Name: "target", Type: arrow.PrimitiveTypes.Float64},
}, nil)

func label(id int64, k int) int64 { return (id*3 + id/7) % int64(k) }

func target(id int64) float64 { return float64(id)*0.5 + float64(id%3) - 1 }

func labelledDataset(mem memory.Allocator, rows, k int) *dataset.Dataset {
	return dataset.Generate(mem, labelled, rows, 10, func(b *array.RecordBuilder, start, n int) {
		for i := range n {
			id := int64(start + i)
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.Int32Builder).Append(int32(label(id, k)))
			b.Field(2).(*array.Float64Builder).Append(target(id))
		}
	})
}

// want computes every metric directly from the unpadded rows.
func want(rows, k int) map[string]float64 {
	var correct, n float64
	conf := make([][]float64, k)
	for i := range conf {
		conf[i] = make([]float64, k)
	}
	var logloss, mse, mae, mseLabel, maeLabel float64
	var scores []float64
	var positives []bool
	for i := range rows {
		id := int64(i)
		l, p := label(id, k), realClass(id, k)
		n++
		if l == p {
			correct++
		}
		conf[l][p]++
		probs := realProbs(id, k)
		logloss -= math.Log(float64(probs[l]))
		d := realValue(id) - target(id)
		mse += d * d
		mae += math.Abs(d)
		d = realValue(id) - float64(l) // the label as a regression target
		mseLabel += d * d
		maeLabel += math.Abs(d)
		if k == 2 {
			scores = append(scores, float64(probs[1]))
			positives = append(positives, l == 1)
		}
	}
	out := map[string]float64{
		"accuracy": correct / n, "confusion": correct / n, "log_loss": logloss / n, "mse": mse / n, "mae": mae / n,
		"mse_label": mseLabel / n, "mae_label": maeLabel / n,
	}
	prec := func(c int) float64 {
		var col float64
		for l := range k {
			col += conf[l][c]
		}
		if col == 0 {
			return 0
		}
		return conf[c][c] / col
	}
	rec := func(c int) float64 {
		var row float64
		for p := range k {
			row += conf[c][p]
		}
		if row == 0 {
			return 0
		}
		return conf[c][c] / row
	}
	f := func(c int) float64 {
		if prec(c)+rec(c) == 0 {
			return 0
		}
		return 2 * prec(c) * rec(c) / (prec(c) + rec(c))
	}
	var mp, mr, mf, present float64
	for c := range k {
		occurs := false
		for o := range k {
			occurs = occurs || conf[c][o] > 0 || conf[o][c] > 0
		}
		if occurs {
			mp, mr, mf, present = mp+prec(c), mr+rec(c), mf+f(c), present+1
		}
	}
	out["precision_macro"], out["recall_macro"], out["f1_macro"] = mp/present, mr/present, mf/present
	if k == 2 {
		out["precision_binary"], out["recall_binary"], out["f1_binary"] = prec(1), rec(1), f(1)
		// Pairwise AUC: independent of the rank-sum formula under test.
		var pairs, wins float64
		for i := range scores {
			for j := range scores {
				if positives[i] && !positives[j] {
					pairs++
					switch {
					case scores[i] > scores[j]:
						wins++
					case scores[i] == scores[j]:
						wins += 0.5
					}
				}
			}
		}
		out["roc_auc"] = math.NaN()
		if pairs > 0 {
			out["roc_auc"] = wins / pairs
		}
	}
	return out
}

func metricsFor(k int) []eval.Metric {
	ms := []eval.Metric{
		eval.Accuracy(), eval.ConfusionMatrix(k), eval.LogLoss(), eval.MSE(), eval.MAE(),
		eval.Precision(eval.Macro, k), eval.Recall(eval.Macro, k), eval.F1(eval.Macro, k),
	}
	if k == 2 {
		ms = append(ms, eval.Precision(eval.Binary, 2), eval.Recall(eval.Binary, 2), eval.F1(eval.Binary, 2), eval.ROCAUC())
	}
	return ms
}

func closeTo(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return got == want || math.Abs(got-want) <= 1e-9*math.Max(math.Abs(want), 1e-300)
}

func TestMetricsExactOnAnySize(t *testing.T) {
	for _, k := range []int{2, 5} {
		for _, rows := range []int{1, 5, 16, 37, 64, 101} {
			for _, replicas := range []int{1, 2, 4} {
				t.Run(fmt.Sprintf("k=%d/rows=%d/replicas=%d", k, rows, replicas), func(t *testing.T) {
					mem := arrowtest.Allocator(t)
					// MSE and MAE read the label column as the regression
					// target here, so give them a dataset whose label is it.
					ms := metricsFor(k)
					report, err := eval.Evaluate(t.Context(), classifier{k}, labelledDataset(mem, rows, k), "label", ms,
						predict.WithBatchSize(16), predict.WithReplicas(replicas), predict.WithAllocator(mem))
					if err != nil {
						t.Fatal(err)
					}
					if report.Rows != int64(rows) {
						t.Fatalf("counted %d rows, want %d", report.Rows, rows)
					}
					w := want(rows, k)
					for name, got := range report.Values {
						if name == "mse" || name == "mae" {
							name += "_label" // the label column is their target here
						}
						if !closeTo(got, w[name]) {
							t.Errorf("%s = %v, want %v", name, got, w[name])
						}
					}
					conf := ms[1].(*eval.ConfusionMetric)
					var total int64
					for l := range k {
						for p := range k {
							total += conf.Count(l, p)
						}
					}
					if total != int64(rows) {
						t.Fatalf("confusion matrix counts %d rows", total)
					}
				})
			}
		}
	}
}

func TestRegressionExact(t *testing.T) {
	for _, rows := range []int{1, 7, 16, 50} {
		mem := arrowtest.Allocator(t)
		report, err := eval.Evaluate(t.Context(), classifier{3}, labelledDataset(mem, rows, 3), "target",
			[]eval.Metric{eval.MSE(), eval.MAE()}, predict.WithBatchSize(16), predict.WithReplicas(2), predict.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		w := want(rows, 3)
		if !closeTo(report.Values["mse"], w["mse"]) || !closeTo(report.Values["mae"], w["mae"]) || report.Rows != int64(rows) {
			t.Fatalf("rows %d: %v, want mse %v mae %v", rows, report.Values, w["mse"], w["mae"])
		}
	}
}

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
