package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
)

// labelled writes rows of features (width 8) with an int64 "y" label of k
// classes, and a k-class model, and returns the input path and the model.
func labelled(t *testing.T, rows, k int) (input, model string) {
	t.Helper()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	ds := dataset.UniformTensors(mem, rows, 8, 1000, 4)
	schema := arrow.NewSchema(append(ds.Schema().Fields(), arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Int64}), nil)
	input = filepath.Join(dir, "in.parquet")
	w, err := sink.Create(input, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewInt64Builder(mem)
		for i := range rec.NumRows() {
			b.Append(int64(i) % int64(k))
		}
		y := b.NewArray()
		b.Release()
		with := array.NewRecordBatch(schema, append(rec.Columns(), y), rec.NumRows())
		err := w.Write(with)
		with.Release()
		y.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{8, 16, k}, cpu.ReLU, rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	model = filepath.Join(dir, "model.dpmlp")
	if err := m.SaveFile(model); err != nil {
		t.Fatal(err)
	}
	return input, model
}

// eval prints an aligned table of exact metrics, writes JSON, and draws
// the confusion matrix, the ROC curve (2 classes) and a histogram.
func TestEvalCommand(t *testing.T) {
	for _, k := range []int{2, 3} {
		input, model := labelled(t, 1001, k)
		dir := t.TempDir()
		js := filepath.Join(dir, "report.json")
		stdout, stderr, err := drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--batch-size", "64",
			"--json", js, "--plot", filepath.Join(dir, "plots"))
		if err != nil {
			t.Fatalf("k=%d: %v\n%s", k, err, stderr)
		}
		if first := strings.Fields(strings.SplitN(stdout, "\n", 2)[0]); len(first) != 2 || first[1] != "1001" {
			t.Fatalf("k=%d: first line %q", k, first)
		}
		for _, want := range []string{"accuracy", "f1_macro", "log_loss", "confusion matrix"} {
			if !strings.Contains(stdout, want) {
				t.Fatalf("k=%d: output lacks %q:\n%s", k, want, stdout)
			}
		}
		var rep struct {
			Rows      int64              `json:"rows"`
			Metrics   map[string]float64 `json:"metrics"`
			Confusion [][]int64          `json:"confusion"`
		}
		b := arrowtest.ReadFile(t, js)
		if err := json.Unmarshal(b, &rep); err != nil || rep.Rows != 1001 || len(rep.Confusion) != k {
			t.Fatalf("k=%d: json %s: %v", k, b, err)
		}
		var total int64
		for _, row := range rep.Confusion {
			for _, n := range row {
				total += n
			}
		}
		if total != 1001 {
			t.Fatalf("k=%d: the confusion matrix counts %d rows", k, total)
		}
		// Two classes: the ROC AUC; more: each class's against the rest,
		// and their mean; a ROC plot either way.
		plots := []string{"confusion.png", "probability.png", "roc.png"}
		auc := "roc_auc"
		if k > 2 {
			auc = "roc_auc_ovr"
			if _, ok := rep.Metrics[fmt.Sprintf("roc_auc_class_%d", k-1)]; !ok {
				t.Fatalf("no per-class ROC AUC for %d classes: %v", k, rep.Metrics)
			}
		}
		if v, ok := rep.Metrics[auc]; !ok || v < 0 || v > 1 {
			t.Fatalf("k=%d: %s %v in %v", k, auc, v, rep.Metrics)
		}
		for _, name := range plots {
			b, err := os.ReadFile(filepath.Join(dir, "plots", name))
			if err != nil || len(b) < 5000 {
				t.Fatalf("k=%d: plot %s: %d bytes, %v", k, name, len(b), err)
			}
			if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() < 400 {
				t.Fatalf("k=%d: plot %s is not a PNG of some size: %v", k, name, err)
			}
		}
	}
	input, model := labelled(t, 10, 3)
	// What eval writes is not replaced without --overwrite, as predict's.
	js := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(js, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--json", js)
	if err == nil || !strings.Contains(stderr, "exists: --overwrite replaces it") {
		t.Fatalf("eval --json onto a file: %v %q", err, stderr)
	}
	if _, stderr, err := drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--json", js, "--overwrite"); err != nil {
		t.Fatalf("eval --json --overwrite: %v %s", err, stderr)
	}
	_, stderr, err = drainpipe("eval", "--model", model, "--input", input, "--label", "nope")
	if err == nil || !strings.Contains(stderr, `"nope"`) {
		t.Fatalf("missing label: %v %q", err, stderr)
	}
}

// A label that is not in the input is named as the label, not as a keep
// column.
func TestEvalMissingLabel(t *testing.T) {
	dir := fixture(t, 10, 8, 4)
	_, stderr, err := drainpipe("eval", "--model", filepath.Join(dir, "model.dpmlp"), "--input", filepath.Join(dir, "in-*.parquet"), "--label", "nope", "--quiet")
	if err == nil || !strings.Contains(stderr, `--label "nope": missing column: "nope" is not in the input`) || strings.Contains(stderr, "keep") {
		t.Fatalf("eval --label nope: %v %q", err, stderr)
	}
}
