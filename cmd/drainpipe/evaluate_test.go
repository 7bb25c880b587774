package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/predict"
)

// doubler is a regression model: its "value" output is twice the "x"
// input.
type doubler struct{ output string }

func (d doubler) OutputSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: d.output, Type: arrow.PrimitiveTypes.Float64}}, nil)
}

func (d doubler) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	return doublerSession{d, cfg.Allocator}, nil
}

type doublerSession struct {
	doubler
	mem memory.Allocator
}

func (s doublerSession) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	x := b.Record.Column(b.Record.Schema().FieldIndices("x")[0]).(*array.Float64)
	vb := array.NewFloat64Builder(s.mem)
	defer vb.Release()
	for _, v := range x.Float64Values() {
		vb.Append(2 * v)
	}
	v := vb.NewArray()
	defer v.Release()
	return array.NewRecordBatch(s.OutputSchema(), []arrow.Array{v}, int64(v.Len())), nil
}

func (doublerSession) Shutdown(context.Context) error { return nil }

// TestEvalRegression evaluates a regression output against targets that
// miss it by a known amount: every row i is off by i%3, over 100 rows in
// batches of 16 (the last one short).
func TestEvalRegression(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}, {Name: "y", Type: arrow.PrimitiveTypes.Float64}}, nil)
	var wantMSE, wantMAE float64
	ds := dataset.Generate(mem, schema, 100, 7, func(b *array.RecordBuilder, start, n int) {
		for i := range n {
			row := float64(start + i)
			off := float64((start + i) % 3)
			b.Field(0).(*array.Float64Builder).Append(row)
			b.Field(1).(*array.Float64Builder).Append(2*row + off)
		}
	})
	for i := range 100 {
		off := float64(i % 3)
		wantMSE += off * off / 100
		wantMAE += off / 100
	}
	plan, err := planEval(doubler{"value"}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := plan.run(t.Context(), doubler{"value"}, ds, "y", predict.WithBatchSize(16), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if out.Rows != 100 || math.Abs(out.Metrics["mse"]-wantMSE) > 1e-12 || math.Abs(out.Metrics["mae"]-wantMAE) > 1e-12 {
		t.Fatalf("report %+v, want 100 rows, mse %v, mae %v", out, wantMSE, wantMAE)
	}
	var table bytes.Buffer
	printEval(&table, out)
	if !strings.Contains(table.String(), "mse  1.6500") || strings.Contains(table.String(), "confusion") {
		t.Fatalf("table:\n%s", table.String())
	}
}

func TestPlanEval(t *testing.T) {
	mlp, err := cpu.NewMLP([]int{4, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		model device.Model
		value string
		k     int
		err   string
	}{
		{"classifier", mlp, "", 3, ""},
		{"a classifier's output as a value", mlp, "class", 0, ""},
		{"regression by default name", doubler{"value"}, "", 0, ""},
		{"regression by --value", doubler{"price"}, "price", 0, ""},
		{"no output to evaluate", doubler{"price"}, "", 0, `no "value" output`},
		{"--value names no output", mlp, "price", 0, `no "price" output`},
	}
	for _, c := range cases {
		plan, err := planEval(c.model, c.value)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case plan.k != c.k:
			t.Errorf("%s: k = %d, want %d", c.name, plan.k, c.k)
		}
	}
}

// A metric with no value (NaN) is written as JSON null, not an error.
func TestMetricValuesJSON(t *testing.T) {
	b, err := json.Marshal(metricValues{"accuracy": 0.5, "roc_auc": math.NaN()})
	if err != nil || string(b) != `{"accuracy":0.5,"roc_auc":null}` {
		t.Fatalf("%s, %v", b, err)
	}
}
