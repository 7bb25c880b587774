package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
)

// separable writes a CSV whose label is learnable: y = f0 > f1.
func separable(t *testing.T, rows int, blank int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString("f0,f1,y\n")
	for i := range rows {
		f0, f1 := r.Float64()*2-1, r.Float64()*2-1
		y := "0"
		if f0 > f1 {
			y = "1"
		}
		if i == blank {
			y = ""
		}
		fmt.Fprintf(&b, "%.4f,%.4f,%s\n", f0, f1, y)
	}
	path := filepath.Join(t.TempDir(), "labelled.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFitCommand(t *testing.T) {
	input := separable(t, 2000, -1)
	model := filepath.Join(t.TempDir(), "fitted.dpmlp")
	stdout, stderr, err := drainpipe("fit", "--input", input, "--label", "y", "--features", "f*", "--output", model)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "2 features, 2 classes, on 1600 rows") || !strings.Contains(stdout, "held out: 400 rows") {
		t.Fatalf("output:\n%s", stdout)
	}
	var accuracy float64
	for line := range strings.Lines(stdout) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "accuracy" {
			accuracy, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	// The classes are linearly separable; a fit that learned nothing
	// scores about 0.5.
	if accuracy < 0.9 {
		t.Fatalf("held-out accuracy %v, want at least 0.9:\n%s", accuracy, stdout)
	}
	// The fitted model is an ordinary model: eval reads it by its feature
	// column and scores every row.
	stdout, stderr, err = drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--features", "f*")
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, stderr)
	}
	if first := strings.Fields(strings.SplitN(stdout, "\n", 2)[0]); len(first) != 2 || first[1] != "2000" {
		t.Fatalf("eval first line %q", first)
	}
}

func TestFitRefusesABlankLabel(t *testing.T) {
	input := separable(t, 300, 123)
	model := filepath.Join(t.TempDir(), "fitted.dpmlp")
	_, stderr, err := drainpipe("fit", "--input", input, "--label", "y", "--features", "f*", "--output", model)
	if err == nil {
		t.Fatal("fit succeeded over a blank label")
	}
	// The error names the file, the row's line (data row 123, after the header) and the column.
	for _, want := range []string{filepath.Base(input), "line 125", `"y"`, "null"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("error lacks %q: %s", want, stderr)
		}
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatalf("a model was written after the error: %v", err)
	}
}

// TestEvalNamesABadLabel checks that eval's label errors are one line that
// names the file and its row, wherever the row falls in the batches, or
// the --label flag when the column is missing.
func TestEvalNamesABadLabel(t *testing.T) {
	model := filepath.Join(t.TempDir(), "fitted.dpmlp")
	if _, stderr, err := drainpipe("fit", "--input", separable(t, 300, -1), "--label", "y", "--features", "f*", "--output", model); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	blank := separable(t, 300, 123)
	seven := filepath.Join(t.TempDir(), "seven.csv")
	b := arrowtest.ReadFile(t, separable(t, 300, -1))
	lines := strings.Split(string(b), "\n")
	lines[1+200] = lines[1+200][:len(lines[1+200])-1] + "7"
	if err := os.WriteFile(seven, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		input, label, want string
	}{
		{blank, "y", filepath.Base(blank) + `, line 125, column "y": null`},
		{seven, "y", `seven.csv, line 202, column "y": eval: inconsistent number of classes: label 7`},
		{seven, "label", `--label "label": `},
	} {
		_, stderr, err := drainpipe("eval", "--model", model, "--input", c.input, "--label", c.label, "--features", "f*", "--batch-size", "64")
		if err == nil {
			t.Fatalf("%s: eval succeeded", c.input)
		}
		if !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("%s: want one line saying %q: %s", c.input, c.want, stderr)
		}
	}
}

// A negative label names its row; a label column of the wrong type names
// the column (it is about no one row).
func TestFitRefusesBadLabels(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ csv, want string }{
		{"f0,y\n0.5,0\n0.25,1\n0.75,-1\n", `neg.csv, line 4, column "y": label -1`},
		{"f0,y\n0.5,0.5\n0.25,1\n", `fit: column "y": eval: bad label column: type float64`},
	} {
		in := filepath.Join(dir, "neg.csv")
		if err := os.WriteFile(in, []byte(c.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := drainpipe("fit", "--input", in, "--label", "y", "--features", "f*", "--output", filepath.Join(dir, "m.dpmlp"))
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: err %v, stderr %q, want %q", c.csv, err, stderr, c.want)
		}
	}
}

// A --features pattern that matches a column that is not a number is
// refused with an error naming it, not a crash.
func TestFitRefusesTextFeatures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "text.parquet")
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "f0", Type: arrow.PrimitiveTypes.Float64},
		{Name: "fname", Type: arrow.BinaryTypes.String},
		{Name: "y", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).AppendValues([]float64{0.5, 0.25}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"abc", "def"}, nil)
	b.Field(2).(*array.Int64Builder).AppendValues([]int64{1, 0}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pqarrow.WriteTable(array.NewTableFromRecords(schema, []arrow.RecordBatch{rec}), f, 2, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "fitted.dpmlp")
	_, stderr, err := drainpipe("fit", "--input", path, "--label", "y", "--features", "f*", "--output", model)
	if err == nil || !strings.Contains(stderr, `"fname"`) || strings.Contains(stderr, "panic") {
		t.Fatalf("fit with a text feature: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(model); !os.IsNotExist(err) {
		t.Fatalf("a model was written: %v", err)
	}
}

// On a file sorted by label, the hold-out still holds every class in its
// share (drawn per class, seeded), so its metrics mean something; the
// same seed fits the same model; a rare class left out is warned of; the
// output is a .dpmlp, and an existing one is not replaced without
// --overwrite.
func TestFitHoldOutIsStratified(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("f0,f1,y\n")
	r := rand.New(rand.NewPCG(3, 4))
	for y := range 3 { // sorted: every 0, then every 1, then every 2
		for range 300 {
			fmt.Fprintf(&b, "%.4f,%.4f,%d\n", float64(y)+r.Float64()*0.5, r.Float64(), y)
		}
	}
	fmt.Fprintf(&b, "%.4f,%.4f,%d\n", 3.0, 0.5, 3) // one row of class 3
	input := filepath.Join(dir, "sorted.csv")
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fit := func(out string, extra ...string) (string, string) {
		t.Helper()
		stdout, stderr, err := drainpipe(append([]string{"fit", "--input", input, "--label", "y", "--features", "f*", "--output", out}, extra...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		return stdout, stderr
	}
	a, b1 := filepath.Join(dir, "a.dpmlp"), filepath.Join(dir, "b.dpmlp")
	stdout, stderr := fit(a)
	if !strings.Contains(stdout, "held out: 180 rows") || !strings.Contains(stderr, "no row of class 3") {
		t.Fatalf("hold-out of a sorted file:\n%s%s", stdout, stderr)
	}
	for _, c := range []string{"\n  0 ", "\n  1 ", "\n  2 "} { // every class in the held-out confusion matrix
		if !strings.Contains(stdout, c) {
			t.Fatalf("the held-out rows lack a class (%q):\n%s", c, stdout)
		}
	}
	fit(b1)
	if !bytes.Equal(arrowtest.ReadFile(t, a), arrowtest.ReadFile(t, b1)) {
		t.Fatal("the same seed fitted two models")
	}
	if _, stderr, err := drainpipe("fit", "--input", input, "--label", "y", "--features", "f*", "--output", a); err == nil || !strings.Contains(stderr, "--overwrite replaces it") {
		t.Fatalf("fit onto an existing model: %v %s", err, stderr)
	}
	if _, stderr, err := drainpipe("fit", "--input", input, "--label", "y", "--features", "f*", "--output", filepath.Join(dir, "m.onnx")); err == nil || !strings.Contains(stderr, "named .dpmlp") {
		t.Fatalf("fit to .onnx: %v %s", err, stderr)
	}
}

// --set-aside on eval and fit, as on predict: a blank label and a value
// that does not parse go to the file with their file row, column and
// reason, and the other rows are evaluated (fitted); --quiet holds the
// progress back; the file is not replaced without --overwrite.
func TestEvalAndFitSetAside(t *testing.T) {
	input := separable(t, 300, 123)
	lines := strings.Split(string(arrowtest.ReadFile(t, input)), "\n")
	lines[1+40] = "x," + strings.SplitN(lines[1+40], ",", 2)[1]
	if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.dpmlp")
	fitAside, evalAside := filepath.Join(dir, "fit-aside.parquet"), filepath.Join(dir, "eval-aside.parquet")
	want := []string{"40 f0", "123 y"}
	stdout, stderr, err := drainpipe("fit", "--input", input, "--label", "y", "--features", "f*", "--output", model, "--set-aside", fitAside, "--quiet")
	if err != nil || !strings.Contains(stderr, "2 rows set aside") || !strings.Contains(stdout, "held out: 60 rows") {
		t.Fatalf("fit: %v\n%s\n%s", err, stdout, stderr)
	}
	if got := asideRows(t, fitAside); !slices.Equal(got, want) {
		t.Fatalf("fit set aside %q, want %q", got, want)
	}
	stdout, stderr, err = drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--features", "f*", "--set-aside", evalAside, "--quiet")
	if err != nil || !regexp.MustCompile(`rows +298\b`).MatchString(stdout) || !regexp.MustCompile(`set_aside +2\b`).MatchString(stdout) || stderr != "" {
		t.Fatalf("eval: %v\n%s\n%s", err, stdout, stderr)
	}
	if got := asideRows(t, evalAside); !slices.Equal(got, want) {
		t.Fatalf("eval set aside %q, want %q", got, want)
	}
	_, stderr, err = drainpipe("eval", "--model", model, "--input", input, "--label", "y", "--features", "f*", "--set-aside", evalAside)
	if err == nil || !strings.Contains(stderr, "--overwrite") {
		t.Fatalf("eval replaced its --set-aside file: %v\n%s", err, stderr)
	}
}

// asideRows returns a set-aside file's rows as "file_row column".
func asideRows(t *testing.T, path string) []string {
	t.Helper()
	rows, cols := filetest.Column(t, path, "file_row"), filetest.Column(t, path, "column")
	for i := range rows {
		rows[i] += " " + cols[i]
	}
	return rows
}
