package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
)

// tokenize writes, for a text column DuckDB wrote, the ids the Rust
// tokenizers gave each text (and masks and offsets), next to the keys,
// in order; a null text is set aside.
func TestTokenizeCommand(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join("..", "..", "seq", "testdata", "encoder")
	texts, _ := filepath.Abs(filepath.Join(folder, "texts.json"))
	in := filepath.Join(dir, "texts.parquet")
	duckdbtest.Query(t, `COPY (
		WITH r AS (SELECT texts FROM read_json(`+duckdb.Quote(texts)+`)),
		i AS (SELECT unnest(generate_series(1, len(texts))) AS i FROM r)
		SELECT i - 1 AS key, CASE WHEN i = 3 THEN NULL ELSE texts[i] END AS body FROM r, i ORDER BY i
	) TO `+duckdb.Quote(in)+` (FORMAT parquet)`)
	out := filepath.Join(dir, "tokens.parquet")
	stdout, stderr, err := drainpipe("tokenize", "--tokenizer", filepath.Join(folder, "tokenizer.json"), "--input", in, "--text-column", "body",
		"--keep", "key", "--mask", "--offsets", "--decode", "--output", out, "--set-aside", filepath.Join(dir, "aside.parquet"), "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=399 ") || !strings.Contains(stdout, "set_aside=1") {
		t.Fatalf("summary %q", stdout)
	}
	var want struct {
		IDs [][]int64 `json:"input_ids"`
	}
	data, _ := os.ReadFile(texts)
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	set, err := fileset.Open([]string{out})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := set.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Schema()
		keys := rec.Column(s.FieldIndices("key")[0]).(*array.Int64)
		ids := rec.Column(s.FieldIndices("input_ids")[0]).(*array.List)
		mask := rec.Column(s.FieldIndices("attention_mask")[0]).(*array.List)
		offsets := rec.Column(s.FieldIndices("offsets")[0]).(*array.List)
		pieces := rec.Column(s.FieldIndices("tokens")[0]).(*array.List)
		decoded := rec.Column(s.FieldIndices("decoded")[0]).(*array.String)
		vals := ids.ListValues().(*array.Int32)
		for i := range int(rec.NumRows()) {
			k := keys.Value(i)
			a, b := ids.ValueOffsets(i)
			got := make([]int64, 0, b-a)
			for _, v := range vals.Int32Values()[a:b] {
				got = append(got, int64(v))
			}
			if !slices.Equal(got, want.IDs[k]) {
				t.Fatalf("key %d: ids %v, the Rust tokenizers' %v", k, got, want.IDs[k])
			}
			if ma, mb := mask.ValueOffsets(i); mb-ma != b-a {
				t.Fatalf("key %d: %d mask values for %d ids", k, mb-ma, b-a)
			}
			if oa, ob := offsets.ValueOffsets(i); ob-oa != b-a {
				t.Fatalf("key %d: %d offsets for %d ids", k, ob-oa, b-a)
			}
			if pa, pb := pieces.ValueOffsets(i); pb-pa != b-a {
				t.Fatalf("key %d: %d pieces for %d ids", k, pb-pa, b-a)
			}
			if b-a > 2 && decoded.Value(i) == "" {
				t.Fatalf("key %d: %d ids decode to nothing", k, b-a)
			}
			rows++
		}
	}
	if rows != 399 {
		t.Fatalf("%d rows", rows)
	}
}

// A text the tokenizer cannot read within --max-text-bytes (one word
// longer than the ceiling: no place to cut its head) is a row error:
// --set-aside writes it aside, naming its row and the ceiling, and the
// other rows are tokenized; without --set-aside it fails the run, naming
// the file's line.
func TestTokenizeSetsAsideTextTooLong(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join("..", "..", "seq", "testdata", "encoder", "tokenizer.json")
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("key,body\n1,hello world\n2,"+strings.Repeat("x", 40_000)+"\n3,bye\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"tokenize", "--tokenizer", tok, "--input", in, "--text-column", "body", "--keep", "key", "--max-text-bytes", "1KiB", "--quiet"}
	_, stderr, err := drainpipe(append(args, "--output", filepath.Join(dir, "fails.parquet"))...)
	if err == nil || !strings.Contains(stderr, "in.csv, line 3") || !strings.Contains(stderr, "the ceiling is 1024") {
		t.Fatalf("without --set-aside: %v\n%s", err, stderr)
	}
	aside := filepath.Join(dir, "aside.parquet")
	stdout, stderr, err := drainpipe(append(args, "--output", filepath.Join(dir, "out.parquet"), "--set-aside", aside)...)
	if err != nil || !strings.Contains(stdout, "rows=2 ") || !strings.Contains(stdout, "set_aside=1") {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	set, err := fileset.Open([]string{aside})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := set.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Schema()
		key := rec.Column(s.FieldIndices("key")[0]).(*array.Int64).Value(0)
		column := rec.Column(s.FieldIndices("column")[0]).(*array.String).Value(0)
		reason := rec.Column(s.FieldIndices("reason")[0]).(*array.String).Value(0)
		if rec.NumRows() != 1 || key != 2 || column != "body" || !strings.Contains(reason, "the ceiling is 1024") {
			t.Fatalf("set aside: %d rows, key %d, column %q, reason %q", rec.NumRows(), key, column, reason)
		}
	}
}
