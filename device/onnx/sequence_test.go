//go:build onnx

package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

// encoder is the BERT-style encoder PyTorch exported
// (scripts/make-seq-encoder.py), its test rows and the outputs of
// PyTorch and of ONNX Runtime for node on each row alone.
var encoder = filepath.Join("..", "..", "seq", "testdata", "encoder")

type encoderRows struct {
	IDs   [][]int64 `json:"input_ids"`
	Types [][]int64 `json:"token_type_ids"`
}

type encoderOutputs struct {
	Mean     [][]float32 `json:"last_hidden_state_mean"`
	Sentence [][]float32 `json:"sentence_embedding"`
	Logits   [][]float32 `json:"logits"`
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(encoder, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

var encoderSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	{Name: "token_type_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
}, nil)

func encoderRecord(mem memory.Allocator, rows encoderRows) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, encoderSchema)
	defer b.Release()
	for i := range rows.IDs {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for f, v := range [][]int64{rows.IDs[i], rows.Types[i]} {
			list := b.Field(f + 1).(*array.ListBuilder)
			list.Append(true)
			list.ValueBuilder().(*array.Int64Builder).AppendValues(v, nil)
		}
	}
	return b.NewRecordBatch()
}

// runEncoder predicts every test row with the encoder under a planner,
// window, replicas and session groups, and returns the output columns.
func runEncoder(t *testing.T, pl seq.Planner, window, replicas, groups int) (mean, sentence, logits [][]float32, st seq.Stats) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows encoderRows
	readJSON(t, "rows.json", &rows)
	eng, err := OpenSequence(filepath.Join(encoder, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := seq.New(eng, seq.WithPlanner(pl), seq.WithTypeIDs("token_type_ids"))
	if err != nil {
		t.Fatal(err)
	}
	rec := encoderRecord(mem, rows)
	defer rec.Release()
	p, err := predict.New(m, predict.WithBatchSize(window), predict.WithReplicas(replicas), predict.WithGroups(groups),
		predict.WithAllocator(mem), predict.WithPassthrough("key"))
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for r := range p.Predict(context.Background(), dataset.FromRecords(encoderSchema, rec)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for i, k := range r.Record.Column(0).(*array.Int64).Int64Values() {
			if k != next {
				t.Fatalf("row %d has key %d", next, k)
			}
			next++
			mean = append(mean, vector(r.Record, "embedding", i))
			sentence = append(sentence, vector(r.Record, "sentence_embedding", i))
			logits = append(logits, vector(r.Record, "logits", i))
		}
		r.Record.Release()
	}
	if next != int64(len(rows.IDs)) {
		t.Fatalf("%d rows out, %d in", next, len(rows.IDs))
	}
	return mean, sentence, logits, m.Stats()
}

func vector(rec arrow.RecordBatch, name string, i int) []float32 {
	col := rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.FixedSizeList)
	w := int(col.DataType().(*arrow.FixedSizeListType).Len())
	return append([]float32(nil), col.ListValues().(*array.Float32).Float32Values()[i*w:(i+1)*w]...)
}

func maxDiff(a, b [][]float32) float64 {
	d := 0.0
	for i := range a {
		for j := range a[i] {
			if x := math.Abs(float64(a[i][j] - b[i][j])); x > d || math.IsNaN(x) {
				d = x
				if math.IsNaN(x) {
					return math.Inf(1)
				}
			}
		}
	}
	return d
}

// TestSequenceMatchesPyTorch runs the PyTorch-exported encoder over
// windows of the test rows (long-tailed lengths, up to the model's 512
// positions) under buckets, budgets, windows, replicas and session
// groups: every output row within 1e-5 of PyTorch's and of ONNX Runtime
// for node's, each row run alone unpadded; and within 1e-6 of this
// device's own run of each row alone.
func TestSequenceMatchesPyTorch(t *testing.T) {
	needLibrary(t)
	var torch, ort encoderOutputs
	readJSON(t, "torch.json", &torch)
	readJSON(t, "ort.json", &ort)
	// Each row alone, at its own length: no padding at all.
	aloneMean, aloneSentence, aloneLogits, _ := runEncoder(t, seq.Planner{MaxLength: 512, Multiple: 1, MaxRows: 1}, 1, 1, 1)
	configs := []struct {
		name                     string
		pl                       seq.Planner
		window, replicas, groups int
	}{
		{"default buckets", seq.Planner{Buckets: seq.DefaultBuckets(512)}, 4096, 1, 1},
		{"no buckets", seq.Planner{MaxLength: 512}, 4096, 1, 1},
		{"small budget", seq.Planner{Buckets: []int{16, 64, 512}, MaxTokens: 512}, 64, 1, 1},
		{"fixed batch sizes", seq.Planner{Buckets: seq.DefaultBuckets(512), BatchSizes: []int{8}}, 100, 1, 1},
		{"replicas", seq.Planner{Buckets: seq.DefaultBuckets(512)}, 128, 2, 1},
		{"session groups", seq.Planner{Buckets: seq.DefaultBuckets(512), MaxTokens: 2048}, 50, 1, 2},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			mean, sentence, logits, st := runEncoder(t, c.pl, c.window, c.replicas, c.groups)
			for _, ref := range []struct {
				name string
				o    encoderOutputs
				tol  float64
			}{{"PyTorch", torch, 1e-5}, {"ONNX Runtime for node", ort, 1e-5}, {"the row alone", encoderOutputs{aloneMean, aloneSentence, aloneLogits}, 1e-6}} {
				for _, d := range []struct {
					what      string
					got, want [][]float32
				}{{"mean-pooled last_hidden_state", mean, ref.o.Mean}, {"sentence_embedding", sentence, ref.o.Sentence}, {"logits", logits, ref.o.Logits}} {
					if diff := maxDiff(d.got, d.want); diff > ref.tol {
						t.Errorf("%s: %s differs from %s's by %.2g (tolerance %g)", c.name, d.what, ref.name, diff, ref.tol)
					}
				}
			}
			t.Logf("padding waste %.3f, %d sub-batches, %d shapes", st.PaddingWaste(), st.SubBatches, len(st.Shapes))
		})
	}
}

// TestSequenceRefusesOtherModels: a model whose inputs are not a
// sequence model's is refused by name.
func TestSequenceRefusesOtherModels(t *testing.T) {
	needLibrary(t)
	_, err := OpenSequence(filepath.Join("testdata", "mlp.onnx"))
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch", err)
	}
	t.Log(err)
}

// A run whose context ends is terminated or refused, never left
// terminating the next: after each cancelled run (cancelled before it,
// while it runs, or after), the next run gives the outputs of a run
// never cancelled.
func TestSequenceCancelledRun(t *testing.T) {
	needLibrary(t)
	eng, err := OpenSequence(filepath.Join(encoder, "model.onnx"), WithIntraOpThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	sh := seq.Shape{Rows: 8, Tokens: 512}
	s, err := eng.Start(t.Context(), seq.EngineConfig{Shapes: []seq.Shape{sh}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	n := sh.Rows * sh.Tokens
	b := &seq.Batch{Shape: sh, IDs: make([]int64, n), Mask: make([]int64, n), TypeIDs: make([]int64, n), Positions: make([]int64, n)}
	for i := range n {
		b.IDs[i], b.Mask[i], b.Positions[i] = int64(100+i%800), 1, int64(i%sh.Tokens)
	}
	first, err := s.Run(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(first[0])
	cancelled := 0
	for range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		go cancel()
		if _, err := s.Run(ctx, b); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled run: %v", err)
			}
			cancelled++
		}
		got, err := s.Run(t.Context(), b)
		if err != nil {
			t.Fatalf("the run after a cancelled one: %v", err)
		}
		if !slices.Equal(got[0], want) {
			t.Fatal("the run after a cancelled one gives other outputs")
		}
	}
	t.Logf("%d of 20 runs cancelled", cancelled)
}
