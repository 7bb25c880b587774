package job

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
)

var errInjected = errors.New("injected failure")

// A job failed at each phase (reading, predicting, writing a part, saving
// the manifest, merging) keeps what it committed; resumed, it gives the
// bytes of a job never interrupted, for a file and a folder output.
func TestFailAtEveryPhaseThenResume(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	input := filepath.Join(dir, "in.parquet")
	w, err := sink.Create(input, dataset.TensorSchema(8), sink.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(mem, 1000, 8, 100, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{8, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
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
		at := map[string]int{"read": 5, "predict": 10, "part": 3, "manifest": 3, "merge": 0}
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
