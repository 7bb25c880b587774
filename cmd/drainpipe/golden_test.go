package main

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from this run's output")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from this run's output (go test -update rewrites it after a change on purpose)\n--- want\n%s--- got\n%s", path, want, got)
	}
}

// TestGoldenOutputs pins the tables fit and eval print and the JSON eval
// writes, on seeded data: a change to their layout shows in review.
func TestGoldenOutputs(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "fitted.dpmlp")
	train := separable(t, 2000, -1)
	stdout, stderr, err := drainpipe("fit", "--input", train, "--label", "y", "--features", "f*", "--output", model)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	golden(t, "fit.txt", strings.ReplaceAll(stdout, model, "fitted.dpmlp"))

	js := filepath.Join(dir, "report.json")
	stdout, stderr, err = drainpipe("eval", "--model", model, "--input", train, "--label", "y", "--features", "f*",
		"--batch-size", "64", "--json", js)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	golden(t, "eval.txt", stdout)

	// The JSON's floats are rounded to 6 significant digits so that the
	// last bits of a sum's order do not count.
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep evalReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	rep.Model = filepath.Base(rep.Model)
	for k, v := range rep.Metrics {
		e := math.Pow(10, 5-math.Floor(math.Log10(math.Abs(v)+1e-300)))
		rep.Metrics[k] = math.Round(v*e) / e
	}
	out, _ := json.MarshalIndent(rep, "", "  ")
	golden(t, "eval.json", string(out)+"\n")
}
