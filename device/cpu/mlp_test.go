package cpu_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

func newMLP(t testing.TB, hidden cpu.Activation, sizes ...int) *cpu.MLP {
	t.Helper()
	m, err := cpu.NewMLP(sizes, hidden, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Layers { // non-zero biases, so a missing bias add shows
		for j := range m.Layers[i].Bias {
			m.Layers[i].Bias[j] = float32(j%5)*0.1 - 0.2
		}
	}
	return m
}

// reference is a plain float64 forward pass, one row at a time.
func reference(m *cpu.MLP, x []float32) []float64 {
	h := make([]float64, len(x))
	for i, v := range x {
		h[i] = float64(v)
	}
	for _, l := range m.Layers {
		y := make([]float64, l.Out)
		for j := range l.Out {
			s := float64(l.Bias[j])
			for i := range l.In {
				s += h[i] * float64(l.Weights[i*l.Out+j])
			}
			switch l.Activation {
			case cpu.ReLU:
				s = math.Max(s, 0)
			case cpu.Tanh:
				s = math.Tanh(s)
			case cpu.Sigmoid:
				s = 1 / (1 + math.Exp(-s))
			}
			y[j] = s
		}
		if l.Activation == cpu.Softmax {
			top, sum := y[0], 0.0
			for _, v := range y {
				top = math.Max(top, v)
			}
			for j := range y {
				y[j] = math.Exp(y[j] - top)
				sum += y[j]
			}
			for j := range y {
				y[j] /= sum
			}
		}
		h = y
	}
	return h
}

// run predicts ds with m and returns classes and probabilities.
func run(t *testing.T, mem memory.Allocator, m device.Model, ds *dataset.Dataset, batch int) (classes []int64, probs [][]float32, err error) {
	t.Helper()
	p, err := predict.New(m, predict.WithBatchSize(batch), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range p.All(t.Context(), ds) {
		if err != nil {
			return classes, probs, err
		}
		classes = append(classes, arrowtest.Int64s(t, "class", rec)...)
		col := rec.Column(1).(*array.FixedSizeList)
		k := int(col.DataType().(*arrow.FixedSizeListType).Len())
		v, err := tensor.Float32(col, k)
		if err != nil {
			t.Fatal(err)
		}
		for r := range col.Len() {
			probs = append(probs, append([]float32(nil), v[r*k:(r+1)*k]...))
		}
	}
	return classes, probs, nil
}

func TestMLPMatchesReference(t *testing.T) {
	for _, c := range []struct {
		act    cpu.Activation
		serial bool
	}{{cpu.ReLU, false}, {cpu.ReLU, true}, {cpu.Tanh, false}, {cpu.Sigmoid, true}, {cpu.Identity, false}} {
		act := c.act
		t.Run(fmt.Sprintf("%s/serial=%t", act, c.serial), func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			// Wide enough that serial products are cut into several tiles.
			m := newMLP(t, act, 12, 200, 80, 5)
			m.Serial = c.serial
			// Batches of 70 rows: more than one 64-row tile; 150 rows: a short tail.
			ds := dataset.UniformTensors(mem, 150, 12, 40, 1)
			classes, probs, err := run(t, mem, m, ds, 70)
			if err != nil {
				t.Fatal(err)
			}
			if len(classes) != 150 {
				t.Fatalf("%d predictions, want 150", len(classes))
			}
			row := 0
			for rec, err := range ds.Records() {
				if err != nil {
					t.Fatal(err)
				}
				x, _ := tensor.Float32(rec.Column(1), 12)
				for r := range int(rec.NumRows()) {
					want := reference(m, x[r*12:(r+1)*12])
					best := 0
					for j, p := range want {
						if math.Abs(float64(probs[row][j])-p) > 1e-5 {
							t.Fatalf("row %d class %d: %v, want %v", row, j, probs[row][j], p)
						}
						if p > want[best] {
							best = j
						}
					}
					if classes[row] != int64(best) {
						t.Fatalf("row %d: class %d, want %d", row, classes[row], best)
					}
					row++
				}
			}
		})
	}
}

func TestSoftmaxRegression(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := cpu.NewSoftmaxRegression(3, 3)
	for i := range 3 { // class = index of the largest feature
		m.Layers[0].Weights[i*3+i] = 10
	}
	ds := dataset.UniformTensors(mem, 50, 3, 7, 2)
	classes, _, err := run(t, mem, m, ds, 16)
	if err != nil {
		t.Fatal(err)
	}
	row := 0
	for rec := range ds.Records() {
		x, _ := tensor.Float32(rec.Column(1), 3)
		for r := range int(rec.NumRows()) {
			v := x[r*3 : r*3+3]
			best := 0
			for j := range v {
				if v[j] > v[best] {
					best = j
				}
			}
			if classes[row] != int64(best) {
				t.Fatalf("row %d %v: class %d", row, v, classes[row])
			}
			row++
		}
	}
}

// listRecord builds a record with a list<float32> "features" column.
func listRecord(mem memory.Allocator, rows [][]float32, nullRow int) arrow.RecordBatch {
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	for i, r := range rows {
		if i == nullRow {
			b.AppendNull()
			continue
		}
		b.Append(true)
		vb.AppendValues(r, nil)
	}
	col := b.NewArray()
	defer col.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "features", Type: col.DataType(), Nullable: true}}, nil)
	return array.NewRecordBatch(s, []arrow.Array{col}, int64(len(rows)))
}

func TestListFeatureColumn(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := newMLP(t, cpu.ReLU, 2, 4, 3)
	rows := [][]float32{{1, 2}, {3, 4}, {5, 6}}
	rec := listRecord(mem, rows, -1)
	defer rec.Release()
	_, probs, err := run(t, mem, m, dataset.FromRecords(rec.Schema(), rec), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if want := reference(m, r); math.Abs(float64(probs[i][0])-want[0]) > 1e-5 {
			t.Fatalf("row %d: %v, want %v", i, probs[i], want)
		}
	}

	ragged := listRecord(mem, [][]float32{{1, 2}, {3, 4}, {5, 6}, {7}}, -1)
	defer ragged.Release()
	_, _, err = run(t, mem, m, dataset.FromRecords(ragged.Schema(), ragged), 2)
	if !errors.Is(err, tensor.ErrWidth) || !strings.Contains(err.Error(), `row 3, column "features"`) || !strings.Contains(err.Error(), "1 values, want 2") {
		t.Fatalf("ragged rows: err %v", err)
	}
}

func TestFeatureErrors(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := newMLP(t, cpu.ReLU, 2, 4, 3)

	nulls := listRecord(mem, [][]float32{{1, 2}, {3, 4}, {5, 6}}, 2)
	defer nulls.Release()
	_, _, err := run(t, mem, m, dataset.FromRecords(nulls.Schema(), nulls), 2)
	if !errors.Is(err, tensor.ErrNull) || !strings.Contains(err.Error(), `row 2, column "features"`) {
		t.Fatalf("null row: err %v", err)
	}

	b := array.NewFixedSizeListBuilder(mem, 2, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	b.Append(true)
	vb.AppendValues([]float32{1, 0}, []bool{true, false})
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "features", Type: col.DataType()}}, nil), []arrow.Array{col}, 1)
	defer rec.Release()
	_, _, err = run(t, mem, m, dataset.FromRecords(rec.Schema(), rec), 2)
	if !errors.Is(err, tensor.ErrNull) || !strings.Contains(err.Error(), `row 0, column "features": tensor: null value in the row`) {
		t.Fatalf("null value: err %v", err)
	}

	wide := dataset.UniformTensors(mem, 5, 3, 5, 1)
	_, _, err = run(t, mem, m, wide, 2)
	if !errors.Is(err, tensor.ErrWidth) || !strings.Contains(err.Error(), "3 values per row, model input size 2") {
		t.Fatalf("width mismatch: err %v", err)
	}

	_, _, err = run(t, mem, m, dataset.FromRecords(arrowtest.IDSchema), 2)
	if err == nil || !strings.Contains(err.Error(), `feature column "features": not in the input schema`) {
		t.Fatalf("missing column: err %v", err)
	}
}

func TestZeroCopyFeatures(t *testing.T) {
	mem := arrowtest.Allocator(t)
	for rec := range dataset.UniformTensors(mem, 10, 4, 10, 1).Records() {
		slice := rec.NewSlice(3, 7)
		x, err := tensor.Float32(slice.Column(1), 4)
		if err != nil {
			t.Fatal(err)
		}
		all := rec.Column(1).(*array.FixedSizeList).ListValues().(*array.Float32).Float32Values()
		if len(x) != 16 || &x[0] != &all[12] {
			t.Fatal("features were copied, or read from the wrong offset")
		}
		slice.Release()
	}
}

func TestSaveLoad(t *testing.T) {
	m := newMLP(t, cpu.Tanh, 6, 5, 4)
	m.Feature = "pixels"
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	got, err := cpu.Load(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got.Feature != "pixels" || len(got.Layers) != 2 || got.Layers[0].Activation != cpu.Tanh || got.Layers[1].Activation != cpu.Softmax {
		t.Fatalf("loaded %+v", got)
	}
	for i := range m.Layers {
		if !equal(got.Layers[i].Weights, m.Layers[i].Weights) || !equal(got.Layers[i].Bias, m.Layers[i].Bias) {
			t.Fatalf("layer %d parameters differ", i)
		}
	}

	flipped := bytes.Clone(data)
	flipped[40] ^= 1
	for name, bad := range map[string][]byte{
		"empty":     nil,
		"truncated": data[:len(data)-9],
		"corrupt":   flipped,
		"foreign":   []byte("PAR1 this is not a model file"),
	} {
		if _, err := cpu.Load(bytes.NewReader(bad)); !errors.Is(err, cpu.ErrFormat) {
			t.Errorf("%s: err %v, want ErrFormat", name, err)
		}
	}

	path := filepath.Join(t.TempDir(), "m.dpmlp")
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := cpu.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := cpu.LoadFile(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err %v", err)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidate(t *testing.T) {
	good := newMLP(t, cpu.ReLU, 3, 4, 2)
	cases := map[string]func(m *cpu.MLP){
		"no layers":          func(m *cpu.MLP) { m.Layers = nil },
		"chain":              func(m *cpu.MLP) { m.Layers[1].In = 5; m.Layers[1].Weights = make([]float32, 10) },
		"weights":            func(m *cpu.MLP) { m.Layers[0].Weights = m.Layers[0].Weights[:3] },
		"hidden softmax":     func(m *cpu.MLP) { m.Layers[0].Activation = cpu.Softmax },
		"output not softmax": func(m *cpu.MLP) { m.Layers[1].Activation = cpu.ReLU },
	}
	for name, breakIt := range cases {
		m := *good
		m.Layers = append([]cpu.Layer(nil), good.Layers...)
		breakIt(&m)
		if err := m.Validate(); !errors.Is(err, cpu.ErrModel) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// A NaN or infinite feature fails its row, named in the run's rows (here
// batch 2, replica 1 of 2, row 5 of that slice: row 37), unless the model
// allows them.
func TestNonFiniteFeatures(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m := newMLP(t, cpu.ReLU, 2, 4, 3)
	rows := make([][]float32, 50)
	for i := range rows {
		rows[i] = []float32{float32(i), 1}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		rows[37][1] = bad
		rec := listRecord(mem, rows, -1)
		ds, err := dataset.AsTensor(dataset.FromRecords(rec.Schema(), rec), "features", 2)
		if err != nil {
			t.Fatal(err)
		}
		p, err := predict.New(m, predict.WithBatchSize(16), predict.WithReplicas(2), predict.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		var rowErr *device.RowError
		for _, err = range p.All(t.Context(), ds) {
		}
		if !errors.Is(err, cpu.ErrNonFinite) || !errors.As(err, &rowErr) || rowErr.Row != 37 || rowErr.Column != "features" ||
			!strings.Contains(err.Error(), fmt.Sprintf("value 1 is %v", bad)) {
			t.Fatalf("%v: err %v (row error %+v)", bad, err, rowErr)
		}
		m.AllowNonFinite = true
		_, probs, err := run(t, mem, m, ds, 16)
		m.AllowNonFinite = false
		if err != nil || len(probs) != 50 || !math.IsNaN(float64(probs[37][0])) {
			t.Fatalf("allowed: %v, %d rows", err, len(probs))
		}
		rec.Release()
	}
}
