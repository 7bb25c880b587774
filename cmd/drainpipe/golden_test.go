package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestReadmeTranscript runs the demo as the README shows it, in an empty
// folder: its output is the README's transcript (but for the timing
// figures), and each command the transcript suggests next works.
func TestReadmeTranscript(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "$ go run ./cmd/drainpipe demo\n")
	if !ok {
		t.Fatal("the README shows no demo transcript")
	}
	want, _, _ := strings.Cut(rest, "```")
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		var out, errs bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &errs
		if err := cmd.Run(); err != nil {
			t.Fatalf("drainpipe %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errs.String())
		}
		return out.String()
	}
	timing := regexp.MustCompile(`wall=\S+ rows/s=\S+`)
	got := run("demo")
	if timing.ReplaceAllString(got, "") != timing.ReplaceAllString(want, "") {
		t.Fatalf("the README's transcript differs from a run:\n--- README\n%s--- run\n%s", want, got)
	}
	_, next, _ := strings.Cut(want, "next:\n")
	for line := range strings.Lines(next) {
		args := strings.Fields(line)
		for i, a := range args {
			args[i] = strings.Trim(a, "'") // as a shell would pass it
		}
		run(args[1:]...)
	}
}
