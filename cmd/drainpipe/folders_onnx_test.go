//go:build onnx

package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// folders are the model folders PyTorch exported with their references
// (scripts/make-st-folders.py).
var folders = filepath.Join("..", "..", "hfmodel", "testdata")

// floatColumn reads a float32 column, or a fixed-size list of float32, of
// every row of a file, by key.
func floatColumn(t *testing.T, path, name string) map[int64][]float32 {
	t.Helper()
	set, err := fileset.Open([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := set.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]float32{}
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Schema()
		keys := rec.Column(s.FieldIndices("key")[0]).(*array.Int64)
		col := rec.Column(s.FieldIndices(name)[0])
		for i := range int(rec.NumRows()) {
			switch c := col.(type) {
			case *array.Float32:
				out[keys.Value(i)] = []float32{c.Value(i)}
			case array.ListLike:
				a, b := c.ValueOffsets(i)
				out[keys.Value(i)] = append([]float32(nil), c.ListValues().(*array.Float32).Float32Values()[a:b]...)
			}
		}
	}
	return out
}

func torchOutputs(t *testing.T, folder, key string) [][]float32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(folders, folder, "torch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	var out [][]float32
	if err := json.Unmarshal(data, &doc); err != nil || json.Unmarshal(doc[key], &out) != nil {
		t.Fatalf("torch.json: %v", err)
	}
	return out
}

// predict --model on folders as sentence-transformers saves them, over
// Parquet DuckDB wrote: a cross-encoder scores (query, passage) pairs
// with --text-pair-column, and a RoBERTa-style folder with every pooling,
// a Dense and a Normalize module embeds texts past its length, as does
// a Qwen3-Embedding-style decoder (left padding, last token); each row
// within 1e-5 of PyTorch's on the row alone.
func TestPredictModelFolders(t *testing.T) {
	needONNX(t)
	for _, c := range []struct {
		folder, column, torchKey string
		args                     []string
	}{
		{"cross-encoder", "score", "sigmoid", []string{"--text-column", "query", "--text-pair-column", "passage"}},
		{"roberta-st", "embedding", "embedding", []string{"--text-column", "query"}},
		{"qwen3-style", "embedding", "embedding", []string{"--text-column", "query"}},
	} {
		t.Run(c.folder, func(t *testing.T) {
			dir := t.TempDir()
			texts, _ := filepath.Abs(filepath.Join(folders, c.folder, "texts.json"))
			in := filepath.Join(dir, "in.parquet")
			pairs := "NULL"
			if c.folder == "cross-encoder" {
				pairs = "pairs[i]"
			}
			duckdbtest.Query(t, `COPY (
				WITH r AS (SELECT * FROM read_json(`+duckdb.Quote(texts)+`)),
				i AS (SELECT unnest(generate_series(1, len(texts))) AS i FROM r)
				SELECT i - 1 AS key, texts[i] AS query, `+pairs+` AS passage FROM r, i ORDER BY i
			) TO `+duckdb.Quote(in)+` (FORMAT parquet)`)
			out := filepath.Join(dir, "out.parquet")
			model := filepath.Join(folders, c.folder)
			if c.folder == "qwen3-style" {
				model = testbin.FolderWithTokenizer(t, model, "qwen3")
			}
			args := append([]string{"predict", "--model", model, "--input", in, "--output", out, "--keep", "key", "--window", "16", "--quiet"}, c.args...)
			_, stderr, err := drainpipe(args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if stderr != "" {
				t.Errorf("--quiet printed:\n%s", stderr)
			}
			got := floatColumn(t, out, c.column)
			want := torchOutputs(t, c.folder, c.torchKey)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for k, w := range want {
				g := got[int64(k)]
				for j := range w {
					if len(g) != len(w) || math.Abs(float64(g[j]-w[j])) > 1e-5 {
						t.Fatalf("row %d: %s %v, PyTorch %v", k, c.column, g, w)
					}
				}
			}
		})
	}
	// A pair column without its text column, a classifier given
	// --pooling, and windows past memory are refused by name.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--text-pair-column", "passage"}, "--text-pair-column"},
		{[]string{"--text-column", "query", "--pooling", "max"}, "--pooling"},
		{[]string{"--window", "100000000"}, "--window"},
		{[]string{"--window", "1099511627776"}, "--window"},
		{[]string{"--window", "5000", "--max-memory", "1MiB"}, "--window"},
	} {
		args := c.args
		_, stderr, err := drainpipe(append([]string{"predict", "--model", filepath.Join(folders, "cross-encoder"), "--input", "x.parquet", "--output", filepath.Join(t.TempDir(), "o.parquet")}, args...)...)
		if err == nil || !strings.Contains(stderr, c.says) {
			t.Errorf("%v: %v\n%s", args, err, stderr)
		}
	}
}
