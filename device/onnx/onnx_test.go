//go:build onnx

package onnx

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ort "github.com/yalue/onnxruntime_go"
	"go.uber.org/goleak"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needLibrary(t testing.TB) {
	t.Helper()
	if DefaultLibrary() == "" {
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+LibraryEnv)
	}
}

func open(t testing.TB, name string, opts ...Option) *Model {
	t.Helper()
	needLibrary(t)
	m, err := Open(filepath.Join("testdata", name), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func envUsers() int {
	env.Lock()
	defer env.Unlock()
	return env.users
}

// direct runs the MLP model on all rows at once with ONNX Runtime alone.
func direct(t *testing.T, x []float32, rows int) ([]float32, []int64) {
	t.Helper()
	if err := acquireEnv(DefaultLibrary()); err != nil {
		t.Fatal(err)
	}
	defer releaseEnv()
	in, err := ort.NewTensor(ort.NewShape(int64(rows), 64), append([]float32(nil), x...))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy()
	probs, _ := ort.NewEmptyTensor[float32](ort.NewShape(int64(rows), 10))
	defer probs.Destroy()
	class, _ := ort.NewEmptyTensor[int64](ort.NewShape(int64(rows)))
	defer class.Destroy()
	s, err := ort.NewAdvancedSession("testdata/mlp.onnx", []string{"features"}, []string{"probabilities", "class"},
		[]ort.Value{in}, []ort.Value{probs, class}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), probs.GetData()...), append([]int64(nil), class.GetData()...)
}

func TestMLPEqualsDirectRun(t *testing.T) {
	m := open(t, "mlp.onnx", WithIntraOpThreads(1))
	for _, rows := range []int{1, 16, 100} {
		// replicas 3 feeds the features as list<float32>, which the session
		// copies (padding rows are empty lists) instead of reading in place.
		for _, replicas := range []int{1, 2, 3} {
			mem := arrowtest.Allocator(t)
			ds := dataset.UniformTensors(mem, rows, 64, 37, 5)
			var x []float32
			for rec, err := range ds.Records() {
				if err != nil {
					t.Fatal(err)
				}
				v, _ := tensor.Float32(rec.Column(1), 64)
				x = append(x, v...)
			}
			wantP, wantC := direct(t, x, rows)
			if replicas == 3 {
				replicas = 1
				ds = asLists(t, mem, x, rows)
			}

			p, err := predict.New(m, predict.WithBatchSize(16), predict.WithReplicas(replicas), predict.WithAllocator(mem),
				predict.WithHooks(predict.Hook{Before: func(context.Context, device.Batch) error {
					if got := envUsers(); got != replicas {
						t.Errorf("%d sessions hold the environment, want %d", got, replicas)
					}
					return nil
				}}))
			if err != nil {
				t.Fatal(err)
			}
			var gotP []float32
			var gotC []int64
			for rec, err := range p.All(t.Context(), ds) {
				if err != nil {
					t.Fatal(err)
				}
				probs, err := tensor.Float32(rec.Column(0), 10)
				if err != nil {
					t.Fatal(err)
				}
				gotP = append(gotP, probs...)
				gotC = append(gotC, rec.Column(1).(*array.Int64).Int64Values()...)
			}
			if len(gotC) != rows {
				t.Fatalf("rows %d: %d predictions", rows, len(gotC))
			}
			for i := range wantP {
				if math.Abs(float64(gotP[i]-wantP[i])) > 1e-6 {
					t.Fatalf("rows %d: probability %d = %v, direct %v", rows, i, gotP[i], wantP[i])
				}
			}
			for i := range wantC {
				if gotC[i] != wantC[i] {
					t.Fatalf("rows %d: class %d = %d, direct %d", rows, i, gotC[i], wantC[i])
				}
			}
			if envUsers() != 0 {
				t.Fatalf("environment still held by %d sessions", envUsers())
			}
		}
	}
}

// asLists returns rows of 64 features as one record of a list<float32>
// column named features.
func asLists(t *testing.T, mem memory.Allocator, x []float32, rows int) *dataset.Dataset {
	t.Helper()
	b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vals := b.ValueBuilder().(*array.Float32Builder)
	for r := range rows {
		b.Append(true)
		vals.AppendValues(x[r*64:(r+1)*64], nil)
	}
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: col.DataType()}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(rows))
	t.Cleanup(rec.Release)
	return dataset.FromRecords(schema, rec)
}

func TestMixedElementTypes(t *testing.T) {
	m := open(t, "mixed.onnx")
	mem := arrowtest.Allocator(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
		{Name: "b", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64)},
		{Name: "c", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float64)},
		{Name: "d", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	const rows = 11
	ds := dataset.Generate(mem, schema, rows, 4, func(b *array.RecordBuilder, start, n int) {
		for i := range n {
			r := start + i
			for f := range 3 {
				b.Field(f).(*array.FixedSizeListBuilder).Append(true)
			}
			b.Field(0).(*array.FixedSizeListBuilder).ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(r), 0.5, 0.25, 0.25}, nil)
			b.Field(1).(*array.FixedSizeListBuilder).ValueBuilder().(*array.Int64Builder).AppendValues([]int64{int64(r), 1}, nil)
			b.Field(2).(*array.FixedSizeListBuilder).ValueBuilder().(*array.Float64Builder).AppendValues([]float64{0.5, 0.5, float64(r)}, nil)
			b.Field(3).(*array.Int32Builder).Append(int32(r))
		}
	})
	p, err := predict.New(m, predict.WithBatchSize(4), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	r := 0
	for rec, err := range p.All(t.Context(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		total := rec.Column(0).(*array.Float64)
		twice, err := typed[int32](rec.Column(1).(*array.FixedSizeList).ListValues())
		if err != nil {
			t.Fatal(err)
		}
		for i := range total.Len() {
			want := 4*float64(r) + 1 + 1 + 1 // a: r+1, b: r+1, c: r+1, d: r
			if total.Value(i) != want || twice[i] != int32(2*r) {
				t.Fatalf("row %d: total %v twice_d %d, want %v and %d", r, total.Value(i), twice[i], want, 2*r)
			}
			r++
		}
	}
	if r != rows {
		t.Fatalf("%d rows predicted", r)
	}
}

func TestCancelAndErrorReleaseSessions(t *testing.T) {
	m := open(t, "mlp.onnx")
	mem := arrowtest.Allocator(t)
	ds := dataset.UniformTensors(mem, 500, 64, 100, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p, _ := predict.New(m, predict.WithBatchSize(16), predict.WithReplicas(2), predict.WithAllocator(mem))
	n := 0
	for r := range p.Predict(ctx, ds) {
		r.Record.Release()
		if n++; n == 3 {
			cancel()
		}
	}
	if envUsers() != 0 {
		t.Fatalf("after cancel, %d sessions hold the environment", envUsers())
	}
	// A model error at batch 2 (a hook stands in for it) also shuts down.
	boom := errors.New("boom")
	p, _ = predict.New(m, predict.WithBatchSize(16), predict.WithAllocator(mem), predict.WithHooks(predict.Hook{
		Before: func(_ context.Context, b device.Batch) error {
			if b.Index == 2 {
				return boom
			}
			return nil
		}}))
	var last error
	for _, err := range p.All(t.Context(), ds) {
		last = err
	}
	if !errors.Is(last, boom) || envUsers() != 0 {
		t.Fatalf("err %v, environment users %d", last, envUsers())
	}
}

func TestBadInput(t *testing.T) {
	needLibrary(t)
	if _, err := Open("testdata/mlp.onnx", WithLibrary("/nonexistent/libonnxruntime.so")); !errors.Is(err, ErrLibrary) {
		t.Errorf("missing library: %v", err)
	}
	if _, err := Open("testdata/none.onnx"); !errors.Is(err, ErrModel) {
		t.Errorf("missing model: %v", err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.onnx")
	if err := os.WriteFile(corrupt, []byte("this is not a protobuf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(corrupt); !errors.Is(err, ErrModel) {
		t.Errorf("corrupt model: %v", err)
	}

	mem := arrowtest.Allocator(t)
	mlp := open(t, "mlp.onnx")
	start := func(m *Model, schema *arrow.Schema, batch int) error {
		p, err := predict.New(m, predict.WithBatchSize(batch), predict.WithAllocator(mem))
		if err != nil {
			return err
		}
		for _, err := range p.All(t.Context(), dataset.FromRecords(schema)) {
			return err
		}
		return nil
	}
	cases := []struct {
		name   string
		model  *Model
		schema *arrow.Schema
		batch  int
		say    string
	}{
		{"input name", mlp, arrow.NewSchema([]arrow.Field{{Name: "pixels", Type: arrow.FixedSizeListOf(64, arrow.PrimitiveTypes.Float32)}}, nil), 8,
			`input "features": no column "features"`},
		{"width", mlp, dataset.TensorSchema(32), 8, "32 values per row, the model wants 64"},
		{"element type", mlp, arrow.NewSchema([]arrow.Field{{Name: "features", Type: arrow.FixedSizeListOf(64, arrow.PrimitiveTypes.Float64)}}, nil), 8,
			"element type float64, the model wants float32"},
	}
	for _, c := range cases {
		err := start(c.model, c.schema, c.batch)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: err %v, want it to say %q", c.name, err, c.say)
		}
	}
	// A session started directly at another size than a fixed batch
	// dimension is refused too.
	_, err := open(t, "fixed_batch.onnx").Start(t.Context(), device.SessionConfig{BatchSize: 16, BatchSizes: []int{16}, Replicas: 1,
		Schema: arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)}, pad.Field()}, nil), Allocator: mem})
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "fixed batch dimension of 8, the session's batch size is 16") {
		t.Errorf("fixed batch: %v", err)
	}
	if envUsers() != 0 {
		t.Fatalf("%d sessions hold the environment after failed starts", envUsers())
	}
	// The same fixed-batch model runs at its own batch size.
	fixed := open(t, "fixed_batch.onnx")
	if w, err := fixed.InputWidth("x"); err != nil || w != 4 {
		t.Fatalf("InputWidth: %d %v", w, err)
	}
	// It says so (device.BatchSizer), and a Predictor of another size is
	// refused before any session starts.
	if got := fixed.BatchSizes(); !slices.Equal(got, []int{8}) || mlp.BatchSizes() != nil {
		t.Fatalf("batch sizes %v and %v", got, mlp.BatchSizes())
	}
	if _, err := predict.New(fixed, predict.WithBatchSize(16)); !errors.Is(err, predict.ErrBatchSizes) {
		t.Fatalf("a Predictor of 16 rows for an 8-row model: %v", err)
	}
	if _, err := predict.New(fixed, predict.WithBatchSize(8)); err != nil {
		t.Fatal(err)
	}
}
