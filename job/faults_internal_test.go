package job

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/sink"
)

var errInjected = errors.New("injected failure")

// faultInput writes rows of 8 features, in records of recordRows, to
// dir/in.parquet and returns its path and a model for them.
func faultInput(t *testing.T, mem memory.Allocator, dir string, rows, recordRows int) (string, *cpu.MLP) {
	t.Helper()
	input := filepath.Join(dir, "in.parquet")
	w, err := sink.Create(input, dataset.TensorSchema(8), sink.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(mem, rows, 8, recordRows, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{8, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return input, m
}

// A job failed at each phase (reading, predicting, writing a part, saving
// the manifest, merging) keeps what it committed; resumed, it gives the
// bytes of a job never interrupted, for a file and a folder output.
func TestFailAtEveryPhaseThenResume(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	input, m := faultInput(t, mem, dir, 1000, 100)
	config := func(out string) Config {
		return Config{Inputs: []string{input}, Output: out, Model: m, ModelID: "test", InputSize: 8,
			Keep: []string{"id"}, BatchSize: 32, PartRows: 128, ReadRows: 100, Allocator: mem}
	}
	content := func(out string) []byte {
		if !IsFolder(out) {
			b := arrowtest.ReadFile(t, out)
			return b
		}
		var all []byte
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			b := arrowtest.ReadFile(t, filepath.Join(out, e.Name()))
			all = append(append(all, e.Name()...), b...)
		}
		return all
	}
	for _, kind := range []string{"file", "folder"} {
		name := func(s string) string {
			if kind == "folder" {
				return filepath.Join(dir, kind, s) + "/"
			}
			return filepath.Join(dir, kind, s+".parquet")
		}
		os.MkdirAll(filepath.Join(dir, kind), 0o755)
		ref := name("ref")
		if _, err := Run(t.Context(), config(ref)); err != nil {
			t.Fatal(err)
		}
		want := content(ref)
		// The event each phase fails at: after some parts are committed.
		// (The file output is written as the parts are: its 4th write
		// comes after 3 parts.)
		at := map[string]int{"read": 5, "predict": 10, "part": 3, "manifest": 3, "merge": 3}
		for _, phase := range []string{"read", "predict", "part", "manifest", "merge"} {
			if phase == "merge" && kind == "folder" {
				continue // a folder has no merge
			}
			t.Run(kind+"/"+phase, func(t *testing.T) {
				out := name(phase)
				cfg := config(out)
				cfg.inject = func(p string, n int) error {
					if p == phase && n == at[phase] {
						return fmt.Errorf("%s %d: %w", phase, n, errInjected)
					}
					return nil
				}
				if _, err := Run(t.Context(), cfg); !errors.Is(err, errInjected) {
					t.Fatalf("failed run: %v", err)
				}
				if kind == "file" {
					if _, err := os.Stat(out); err == nil {
						t.Fatal("an output appeared for a failed run")
					}
				} else if _, err := os.Stat(filepath.Join(out, successName)); err == nil {
					t.Fatal("_SUCCESS in the folder of a failed run")
				}
				cfg = config(out)
				cfg.Resume = true
				sum, err := Run(t.Context(), cfg)
				if err != nil {
					t.Fatalf("resume: %v", err)
				}
				if sum.Rows != 1000 || sum.RowsIn != 1000 || sum.ResumedRows == 0 {
					t.Fatalf("resume summary %+v", sum)
				}
				if !bytes.Equal(content(out), want) {
					t.Fatal("the resumed output differs from the uninterrupted run's")
				}
			})
		}
	}
}

// WriteFile writes its one file whole or not at all: a failure while
// reading or predicting leaves no output and no temporary file, and a
// retry writes every row once, the values of Run's file output.
func TestWriteFileWholeOrNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	input, m := faultInput(t, mem, dir, 1000, 100)
	config := func(out string) Config {
		return Config{Inputs: []string{input}, Output: out, Model: m, ModelID: "test", InputSize: 8,
			Keep: []string{"id"}, BatchSize: 32, ReadRows: 77, Allocator: mem}
	}
	out := filepath.Join(dir, "out.parquet")
	for _, phase := range []string{"read", "predict"} {
		cfg := config(out)
		cfg.inject = func(p string, n int) error {
			if p == phase && n == 3 {
				return errInjected
			}
			return nil
		}
		if _, err := WriteFile(t.Context(), cfg); !errors.Is(err, errInjected) {
			t.Fatalf("%s failure: %v", phase, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Fatalf("after a %s failure the folder holds %d entries, want only the input", phase, len(entries))
		}
	}
	sum, err := WriteFile(t.Context(), config(out))
	if err != nil || sum.Rows != 1000 || sum.RowsIn != 1000 {
		t.Fatalf("retry: %+v, %v", sum, err)
	}
	ref := filepath.Join(dir, "ref.parquet")
	if _, err := Run(t.Context(), config(ref)); err != nil {
		t.Fatal(err)
	}
	got, want := filetest.ReadWhole(t, mem, out), filetest.ReadWhole(t, mem, ref)
	defer got.Release()
	defer want.Release()
	if !array.RecordEqual(got, want) {
		t.Fatalf("WriteFile wrote %d rows, Run %d, or their values differ", got.NumRows(), want.NumRows())
	}
	if _, err := WriteFile(t.Context(), config(out)); !errors.Is(err, sink.ErrExists) {
		t.Fatalf("an existing output without Overwrite: %v", err)
	}
	for _, cfg := range []Config{func() Config { c := config(out); c.SetAside = filepath.Join(dir, "aside.parquet"); return c }(),
		func() Config { c := config(out); c.Resume = true; return c }(), config(filepath.Join(dir, "folder") + string(filepath.Separator))} {
		if _, err := WriteFile(t.Context(), cfg); err == nil {
			t.Fatalf("WriteFile took %+v", cfg)
		}
	}
}

// A fresh run writes its file output as it goes, with no merge; a run that
// resumes merges its parts. Both write the same bytes, over several of the
// output's row-group records (140,000 rows, records of 65,536): a run
// failed while writing the output's second record, resumed, gives the
// bytes of a run never interrupted, and so does one failed at a part.
func TestStreamedOutputIsTheMerged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	input, m := faultInput(t, mem, dir, 140_000, 4096)
	config := func(out string) Config {
		return Config{Inputs: []string{input}, Output: out, Model: m, ModelID: "test", InputSize: 8,
			Keep: []string{"id"}, BatchSize: 256, PartRows: 1 << 15, Allocator: mem}
	}
	ref := filepath.Join(dir, "ref.parquet")
	if _, err := Run(t.Context(), config(ref)); err != nil {
		t.Fatal(err)
	}
	want := arrowtest.ReadFile(t, ref)
	for _, fail := range []struct {
		phase string
		at    int
	}{{"merge", 1}, {"part", 2}} {
		out := filepath.Join(dir, fail.phase+".parquet")
		cfg := config(out)
		cfg.inject = func(p string, n int) error {
			if p == fail.phase && n == fail.at {
				return errInjected
			}
			return nil
		}
		if _, err := Run(t.Context(), cfg); !errors.Is(err, errInjected) {
			t.Fatalf("%s: %v", fail.phase, err)
		}
		cfg = config(out)
		cfg.Resume = true
		if _, err := Run(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(arrowtest.ReadFile(t, out), want) {
			t.Fatalf("failed at %s %d and resumed (merged): not the bytes of the run never interrupted (streamed)", fail.phase, fail.at)
		}
	}
}
