package head_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/head"
)

// logitsModel predicts fixed logits, width values a row.
type logitsModel struct {
	width  int
	logits []float32
	mem    memory.Allocator
}

func (m *logitsModel) OutputSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "logits", Type: arrow.FixedSizeListOfNonNullable(int32(m.width), arrow.PrimitiveTypes.Float32)}}, nil)
}

func (m *logitsModel) Start(context.Context, device.SessionConfig) (device.Session, error) {
	return m, nil
}

func (m *logitsModel) Shutdown(context.Context) error { return nil }

func (m *logitsModel) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	lb := array.NewFixedSizeListBuilderWithField(m.mem, int32(m.width), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32})
	defer lb.Release()
	for r := range len(m.logits) / m.width {
		lb.Append(true)
		lb.ValueBuilder().(*array.Float32Builder).AppendValues(m.logits[r*m.width:(r+1)*m.width], nil)
	}
	col := lb.NewArray()
	defer col.Release()
	return array.NewRecordBatch(m.OutputSchema(), []arrow.Array{col}, int64(col.Len())), nil
}

func run(t *testing.T, alloc memory.Allocator, m device.Model, rows int) arrow.RecordBatch {
	t.Helper()
	s, err := m.Start(t.Context(), device.SessionConfig{BatchSize: rows, Allocator: alloc})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	in := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, int64(rows))
	defer in.Release()
	out, err := s.Predict(t.Context(), device.Batch{Record: in})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func float32s(rec arrow.RecordBatch, name string) []float32 {
	col := rec.Column(rec.Schema().FieldIndices(name)[0])
	if l, ok := col.(*array.FixedSizeList); ok {
		return l.ListValues().(*array.Float32).Float32Values()
	}
	return col.(*array.Float32).Float32Values()
}

func near(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Abs(float64(x-y)) < 1e-6 })
}

// Each function makes the columns transformers' pipeline makes, with
// the values it makes: softmax, sigmoid (multi-label and one logit) and
// none (regression).
func TestFunctions(t *testing.T) {
	sig := func(x float64) float32 { return float32(1 / (1 + math.Exp(-x))) }
	e1, e2, e3 := math.Exp(1), math.Exp(2), math.Exp(0)
	cases := []struct {
		name    string
		width   int
		logits  []float32
		h       head.Head
		columns []string
		probs   []float32
		scores  []float32
		classes []int64
	}{
		{"softmax", 3, []float32{1, 2, 0, 0, 0, 0}, head.Head{Labels: []string{"a", "b", "c"}},
			[]string{"logits", "probabilities", "class", "score", "label"},
			[]float32{float32(e1 / (e1 + e2 + e3)), float32(e2 / (e1 + e2 + e3)), float32(e3 / (e1 + e2 + e3)), 1. / 3, 1. / 3, 1. / 3},
			[]float32{float32(e2 / (e1 + e2 + e3)), 1. / 3}, []int64{1, 0}},
		{"multi-label", 2, []float32{-1, 3}, head.Head{Function: head.Sigmoid},
			[]string{"logits", "probabilities", "class", "score"}, []float32{sig(-1), sig(3)}, []float32{sig(3)}, []int64{1}},
		{"cross-encoder", 1, []float32{0.5, -2}, head.Head{Function: head.Sigmoid},
			[]string{"logits", "score"}, nil, []float32{sig(0.5), sig(-2)}, nil},
		{"regression", 1, []float32{0.5, -2}, head.Head{Function: head.None},
			[]string{"logits", "score"}, nil, []float32{0.5, -2}, nil},
		{"regression of two", 2, []float32{0.5, -2}, head.Head{Function: head.None},
			[]string{"logits", "class", "score"}, nil, []float32{0.5}, []int64{0}},
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, c := range cases {
		m, err := head.Wrap(&logitsModel{width: c.width, logits: c.logits, mem: mem}, c.h)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range m.OutputSchema().Fields() {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, c.columns) {
			t.Fatalf("%s: columns %v, want %v", c.name, names, c.columns)
		}
		out := run(t, mem, m, len(c.logits)/c.width)
		if !out.Schema().Equal(m.OutputSchema()) {
			t.Fatalf("%s: schema %s, stated %s", c.name, out.Schema(), m.OutputSchema())
		}
		if c.probs != nil && !near(float32s(out, "probabilities"), c.probs) {
			t.Errorf("%s: probabilities %v, want %v", c.name, float32s(out, "probabilities"), c.probs)
		}
		if !near(float32s(out, "score"), c.scores) {
			t.Errorf("%s: scores %v, want %v", c.name, float32s(out, "score"), c.scores)
		}
		if c.classes != nil {
			if got := out.Column(out.Schema().FieldIndices("class")[0]).(*array.Int64).Int64Values(); !slices.Equal(got, c.classes) {
				t.Errorf("%s: classes %v, want %v", c.name, got, c.classes)
			}
		}
		out.Release()
	}
}

// Pick chooses as transformers' text-classification pipeline does.
func TestPick(t *testing.T) {
	for _, c := range []struct {
		labels  int
		problem string
		want    head.Function
	}{{2, "", head.Softmax}, {1, "", head.Sigmoid}, {5, "multi_label_classification", head.Sigmoid}, {1, "regression", head.None}, {3, "single_label_classification", head.Softmax}} {
		if got := head.Pick(c.labels, c.problem); got != c.want {
			t.Errorf("Pick(%d, %q) = %s, want %s", c.labels, c.problem, got, c.want)
		}
	}
}

// A head that does not fit is refused at Wrap: no logits, labels of
// another count, a column the model has already.
func TestWrapRefuses(t *testing.T) {
	m := &logitsModel{width: 3}
	if _, err := head.Wrap(m, head.Head{Column: "scores"}); !errors.Is(err, head.ErrHead) {
		t.Errorf("no such column: %v", err)
	}
	if _, err := head.Wrap(m, head.Head{Labels: []string{"a", "b"}}); !errors.Is(err, head.ErrHead) {
		t.Errorf("2 labels for 3 logits: %v", err)
	}
	inner, err := head.Wrap(m, head.Head{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := head.Wrap(inner, head.Head{}); !errors.Is(err, head.ErrHead) {
		t.Errorf("a second head over the first's columns: %v", err)
	}
}
