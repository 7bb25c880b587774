package job_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
)

// folderFiles returns the files of a folder output by name, with their
// bytes (the manifest and the marker included).
func folderFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

func TestFolderOutput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 1003)
	out := filepath.Join(t.TempDir(), "out") + "/"
	sum, err := job.Run(t.Context(), config(mem, input, out, m))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 1003 || sum.Parts != 8 {
		t.Fatalf("summary %+v", sum)
	}
	files := folderFiles(t, out)
	names := slices.Sorted(maps.Keys(files))
	want := []string{"_SUCCESS", "_manifest.json"}
	for i := range 8 {
		want = append(want, fmt.Sprintf("part-%05d.parquet", i))
	}
	if !slices.Equal(names, want) {
		t.Fatalf("folder holds %v, want %v", names, want)
	}
	for _, in := range []string{filepath.Join(out, "*.parquet"), out} {
		if got := outputIDs(t, in); !slices.Equal(got, seqIDs(1003)) {
			t.Fatalf("the folder read as a dataset (%s): %d rows, want 0..1002 once each", in, len(got))
		}
	}
	if !strings.Contains(string(files["_SUCCESS"]), `"rows": 1003`) {
		t.Fatalf("_SUCCESS: %s", files["_SUCCESS"])
	}
	if _, err := os.Stat(filepath.Clean(out) + ".parts"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a parts folder beside the output")
	}
	// Complete: refused without Overwrite, a no-op with Resume, redone with
	// Overwrite (an existing folder is a folder output without the slash).
	cfg := config(mem, input, filepath.Clean(out), m)
	if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrOutputExists) {
		t.Fatalf("second run: %v", err)
	}
	cfg.Resume = true
	if sum, err := job.Run(t.Context(), cfg); err != nil || sum.Rows != 1003 || sum.Batches != 0 {
		t.Fatalf("resuming a complete folder: %+v, %v", sum, err)
	}
	cfg.Resume, cfg.Overwrite = false, true
	if _, err := job.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(folderFiles(t, out), files, bytes.Equal) {
		t.Fatal("an overwritten folder differs from the first run's")
	}
}

// A folder output killed (cancelled) at several points and resumed holds
// the same files, byte for byte, as one never interrupted, and no
// _SUCCESS until it is complete.
func TestFolderResumeIsIdentical(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 2000)
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref") + "/"
	if _, err := job.Run(t.Context(), config(mem, input, ref, m)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out") + "/"
	for _, stopAt := range []int64{250, 700, 1500} {
		cfg := config(mem, input, out, m)
		cfg.Resume = true
		interrupt(t, cfg, stopAt)
		if _, err := os.Stat(filepath.Join(out, "_SUCCESS")); err == nil {
			t.Fatal("_SUCCESS in an unfinished folder")
		}
	}
	cfg := config(mem, input, out, m)
	if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrInterrupted) {
		t.Fatalf("rerun without resume: err %v", err)
	}
	cfg.Resume = true
	if sum, err := job.Run(t.Context(), cfg); err != nil || sum.ResumedRows == 0 {
		t.Fatalf("resume: %+v, %v", sum, err)
	}
	if !maps.EqualFunc(folderFiles(t, out), folderFiles(t, ref), bytes.Equal) {
		t.Fatal("the resumed folder differs from the uninterrupted one")
	}
}

// A folder the job did not write is never written into or cleared.
func TestFolderOutputLeavesForeignFolders(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 100)
	out := t.TempDir()
	mine := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, overwrite := range []bool{false, true} {
		cfg := config(mem, input, out, m)
		cfg.Overwrite = overwrite
		if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrNotOutput) {
			t.Fatalf("overwrite %v: err %v", overwrite, err)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Fatalf("the folder was touched: %v", entries)
	}
	// A run killed while writing its first manifest leaves only the
	// manifest's temporary file: the folder is still the job's.
	out2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(out2, "._manifest.json.tmp-123"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(t.Context(), config(mem, input, out2+"/", m)); err != nil {
		t.Fatalf("a folder holding a killed run's temporary manifest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out2, "._manifest.json.tmp-123")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the temporary manifest stayed")
	}
}

func seqIDs(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// A job over no rows leaves a folder with one empty part of the output's
// schema, so the folder still reads as a dataset.
func TestFolderOutputOfNoRows(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 0)
	out := filepath.Join(t.TempDir(), "out") + "/"
	if sum, err := job.Run(t.Context(), config(mem, input, out, m)); err != nil || sum.Rows != 0 || sum.Parts != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	ds, err := fileset.Read([]string{filepath.Join(out, "*.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Schema().String(); !strings.Contains(got, "id: type=int64") || !strings.Contains(got, "probabilities") {
		t.Fatalf("schema %s", got)
	}
	if n, err := ds.Count(); n != 0 || err != nil {
		t.Fatalf("%d rows, %v", n, err)
	}
}

// gated is a model whose sessions wait at their first batch until open is
// closed.
type gated struct {
	device.Model
	started chan struct{}
	open    chan struct{}
}

func (g *gated) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := g.Model.Start(ctx, cfg)
	return &gatedSession{Session: s, g: g}, err
}

type gatedSession struct {
	device.Session
	g *gated
}

func (s *gatedSession) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	select {
	case s.g.started <- struct{}{}:
	default:
	}
	<-s.g.open
	return s.Session.Predict(ctx, b)
}

// One job per output: while one runs, another on the same output (plain,
// resume or overwrite) is refused and changes nothing.
func TestOneJobPerOutput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 300)
	for _, out := range []string{filepath.Join(t.TempDir(), "out.parquet"), filepath.Join(t.TempDir(), "out") + "/"} {
		g := &gated{Model: m, started: make(chan struct{}, 1), open: make(chan struct{})}
		cfg := config(mem, input, out, m)
		cfg.Model = g
		first := make(chan error, 1)
		go func() {
			_, err := job.Run(t.Context(), cfg)
			first <- err
		}()
		<-g.started
		for _, edit := range []func(*job.Config){func(*job.Config) {}, func(c *job.Config) { c.Resume = true }, func(c *job.Config) { c.Overwrite = true }} {
			c := config(mem, input, out, m)
			edit(&c)
			_, err := job.Run(t.Context(), c)
			if !errors.Is(err, job.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
				t.Fatalf("%s: second job: %v", out, err)
			}
		}
		close(g.open)
		if err := <-first; err != nil {
			t.Fatalf("%s: the first job failed: %v", out, err)
		}
		read := out
		if job.IsFolder(out) {
			read = filepath.Join(out, "*.parquet")
		}
		if got := outputIDs(t, read); !slices.Equal(got, seqIDs(300)) {
			t.Fatalf("%s: %d rows", out, len(got))
		}
		entries, _ := os.ReadDir(filepath.Dir(filepath.Clean(out)))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".lock") {
				t.Fatalf("%s: lock file %s left", out, e.Name())
			}
		}
	}
}

// An output that is an input, or a folder output that holds the inputs,
// is refused, even with Overwrite.
func TestOutputIsInput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 100)
	for _, out := range []string{filepath.Join(filepath.Dir(input), "a.parquet"), filepath.Dir(input) + "/"} {
		cfg := config(mem, input, out, m)
		cfg.Overwrite = true
		if _, err := job.Run(t.Context(), cfg); !errors.Is(err, job.ErrOutputIsInput) {
			t.Fatalf("output %s: %v", out, err)
		}
	}
	if got := outputIDs(t, input); !slices.Equal(got, seqIDs(100)) {
		t.Fatal("an input changed")
	}
}
