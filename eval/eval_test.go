package eval_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
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
