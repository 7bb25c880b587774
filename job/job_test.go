package job_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
)

const width = 8

// setup writes rows of UniformTensors(width) to two Parquet files and
// returns their glob and a model.
func setup(t testing.TB, mem memory.Allocator, rows int) (string, *cpu.MLP) {
	t.Helper()
	dir := t.TempDir()
	half := rows / 2
	for f, r := range [][2]int{{0, half}, {half, rows}} {
		w, err := sink.Create(filepath.Join(dir, []string{"a.parquet", "b.parquet"}[f]), dataset.TensorSchema(width), sink.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Copy(w, dataset.Skip(dataset.UniformTensors(mem, r[1], width, 1000, 1), int64(r[0])).Records()); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cpu.NewMLP([]int{width, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "*.parquet"), m
}

func config(mem memory.Allocator, input, output string, m *cpu.MLP) job.Config {
	return job.Config{Inputs: []string{input}, Output: output, Model: m, ModelID: "test", InputSize: width,
		Keep: []string{"id"}, BatchSize: 32, PartRows: 100, ReadRows: 77, Allocator: mem}
}

// interrupt runs cfg until at least at rows are done, then cancels it, as
// a kill would stop it between batches.
func interrupt(t *testing.T, cfg job.Config, at int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg.Progress = func(done, _ int64) {
		if done >= at {
			cancel()
		}
	}
	if _, err := job.Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop at %d rows: err %v", at, err)
	}
}

func outputIDs(t *testing.T, path string) []int64 {
	t.Helper()
	ds, err := fileset.Read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, arrowtest.Int64s(t, "id", rec)...)
	}
	return ids
}

func TestRunWritesEveryRowOnce(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 1003)
	out := filepath.Join(t.TempDir(), "out.parquet")
	sum, err := job.Run(t.Context(), config(mem, input, out, m))
	if err != nil {
		t.Fatal(err)
	}
	// Parts of 128 rows: 100 rounded up to a multiple of the batch.
	if sum.Rows != 1003 || sum.Batches != 32 || sum.PaddedRows != 21 || sum.Parts != 8 {
		t.Fatalf("summary %+v", sum)
	}
	if got := outputIDs(t, out); !slices.Equal(got, seqIDs(1003)) {
		t.Fatalf("output ids: %d rows, want 0..1002 once each", len(got))
	}
	if _, err := os.Stat(out + ".parts"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the parts folder is left after success")
	}
	// An existing output is not replaced without Overwrite.
	if _, err := job.Run(t.Context(), config(mem, input, out, m)); !errors.Is(err, job.ErrOutputExists) {
		t.Fatalf("second run: err %v", err)
	}
	cfg := config(mem, input, out, m)
	cfg.Overwrite = true
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
}

// A run cancelled part-way and resumed gives the same bytes as one that
// never stopped.
func TestResumeAfterCancelIsIdentical(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 2000)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.parquet")
	if _, err := job.Run(t.Context(), config(mem, input, ref, m)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	for _, stopAt := range []int64{250, 700, 1500} {
		cfg := config(mem, input, out, m)
		cfg.Resume = true
		interrupt(t, cfg, stopAt)
		if _, err := os.Stat(out); err == nil {
			t.Fatal("an output appeared for an unfinished job")
		}
	}
	cfg := config(mem, input, out, m)
	if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrInterrupted) {
		t.Fatalf("rerun without resume: err %v", err)
	}
	cfg.Resume = true
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedRows == 0 || sum.Rows != 2000 {
		t.Fatalf("summary %+v", sum)
	}
	a := arrowtest.ReadFile(t, ref)
	b := arrowtest.ReadFile(t, out)
	if !bytes.Equal(a, b) {
		t.Fatal("the resumed output differs from the uninterrupted one")
	}
}

// A run killed after its output was written but before its parts were
// removed has finished: resuming it only removes the parts.
func TestResumeAfterOutputWritten(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 500)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	interrupt(t, config(mem, input, out, m), 300)
	// Keep the manifest of the interrupted run, finish the job, and put the
	// manifest back as if the final clean-up had not happened.
	manifest, err := os.ReadFile(filepath.Join(out+".parts", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(mem, input, out, m)
	cfg.Resume = true
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	want := arrowtest.ReadFile(t, out)
	os.MkdirAll(out+".parts", 0o755)
	if err := os.WriteFile(filepath.Join(out+".parts", "manifest.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := arrowtest.ReadFile(t, out); !bytes.Equal(got, want) || sum.Rows != 500 || !sum.AlreadyComplete {
		t.Fatalf("output changed, or summary %+v", sum)
	}
	if _, err := os.Stat(out + ".parts"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("parts left")
	}
	// Without the parts, the output names the job that wrote it: resuming
	// says it is complete and touches nothing.
	sum, err = job.Run(t.Context(), cfg)
	if got := arrowtest.ReadFile(t, out); err != nil || !sum.AlreadyComplete || sum.Rows != 500 || !bytes.Equal(got, want) {
		t.Fatalf("resuming a complete job: %+v, %v", sum, err)
	}
	// A removal of the parts cut short leaves parts without a manifest:
	// resuming the complete job removes them.
	os.MkdirAll(out+".parts", 0o755)
	if err := os.WriteFile(filepath.Join(out+".parts", "part-000003.arrow"), []byte("left"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err = job.Run(t.Context(), cfg); err != nil || !sum.AlreadyComplete || sum.Rows != 500 {
		t.Fatalf("resuming with parts left and no manifest: %+v, %v", sum, err)
	}
	if _, err := os.Stat(out + ".parts"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the parts left without a manifest stayed")
	}
	// An output another job wrote is not this one's to touch.
	other := config(mem, input, out, m)
	other.BatchSize, other.Resume = 64, true
	if _, err := job.Run(t.Context(), other); !errors.Is(err, job.ErrOutputExists) {
		t.Fatalf("another job's output: %v", err)
	}
}

// A run stopped after its last part but before the merge resumes with no
// rows left to predict, and merges.
func TestResumeWithEveryPartDone(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 512) // 4 parts of 128 rows exactly
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.parquet")
	if _, err := job.Run(t.Context(), config(mem, input, ref, m)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	interrupt(t, config(mem, input, out, m), 512)
	cfg := config(mem, input, out, m)
	cfg.Resume = true
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ResumedRows != 512 || sum.Batches != 0 {
		t.Fatalf("summary %+v: every row was done before the resume", sum)
	}
	a := arrowtest.ReadFile(t, ref)
	b := arrowtest.ReadFile(t, out)
	if !bytes.Equal(a, b) {
		t.Fatal("output differs from the uninterrupted run's")
	}
}

func TestResumeRefusesChangedJob(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 500)
	out := filepath.Join(t.TempDir(), "out.parquet")
	interrupt(t, config(mem, input, out, m), 200)
	cfg := config(mem, input, out, m)
	cfg.Resume = true
	cfg.BatchSize = 64
	if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrChanged) {
		t.Fatalf("changed batch size: err %v", err)
	}
}

func TestBadJobs(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 100)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wide, _ := cpu.NewMLP([]int{width + 1, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	cases := []struct {
		name string
		edit func(c *job.Config)
		say  string
	}{
		{"missing feature column", func(c *job.Config) { c.FeatureColumn = "pixels" }, `no column "pixels"`},
		{"missing keep column", func(c *job.Config) { c.Keep = []string{"key"} }, `missing column: "key" is not in the input`},
		{"gather matches nothing", func(c *job.Config) { c.Gather = []string{"x*"} }, "match no column"},
		{"model width", func(c *job.Config) { c.Model, c.InputSize = wide, width+1 }, "8 values per row, want 9"},
		{"output not writable", func(c *job.Config) { c.Output = filepath.Join(notDir, "out.parquet") }, "not a directory"},
		{"output format", func(c *job.Config) { c.Output = filepath.Join(dir, "out.txt") }, "extension"},
		{"missing input", func(c *job.Config) { c.Inputs = []string{filepath.Join(dir, "none.parquet")} }, "no such file"},
	}
	for _, tc := range cases {
		cfg := config(mem, input, out, m)
		tc.edit(&cfg)
		_, err := job.Run(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: err %v, want it to say %q", tc.name, err, tc.say)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("%s: left %v behind", tc.name, entries)
		}
	}
	cfg := config(mem, input, out, m)
	cfg.Keep = []string{"key"}
	if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrKeep) {
		t.Errorf("missing keep column: err %v, want ErrKeep", err)
	}
}
