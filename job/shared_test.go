package job_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
)

// grouped writes rows ids [0, rows) to files of the given rows each, in
// row groups of about group rows, and returns their glob.
func grouped(t testing.TB, mem memory.Allocator, dir string, group int64, files ...int) string {
	t.Helper()
	at := 0
	for f, n := range files {
		ds := dataset.Skip(dataset.UniformTensors(mem, at+n, width, 37, 1), int64(at))
		filetest.WriteParquet(t, filepath.Join(dir, fmt.Sprintf("in-%d.parquet", f)), ds, sink.WithAllocator(mem), sink.WithRowGroupBytes(group*(width*4+8+1)))
		at += n
	}
	return filepath.Join(dir, "in-*.parquet")
}

// Units come from the inputs alone: the same for every shard count, each
// of whole row groups of one file, together every row once, in order.
func TestUnitsComeFromTheInputs(t *testing.T) {
	mem := arrowtest.Allocator(t)
	_, m := setup(t, mem, 10)
	in := grouped(t, mem, t.TempDir(), 40, 1000, 17, 0, 333)
	cfg := config(mem, in, t.TempDir()+"/", m)
	cfg.PartRows = 100
	plan, err := job.PlanUnits(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for i, u := range plan.Units {
		if i > 0 && u.Name() <= plan.Units[i-1].Name() {
			t.Fatalf("unit %d (%s) does not sort after %s", i, u.Name(), plan.Units[i-1].Name())
		}
		if u.Job != plan.Fingerprint || u.Version == "" {
			t.Fatalf("unit %d: %+v", i, u)
		}
		rows += u.Rows
	}
	if rows != 1350 || len(plan.Committed) != 0 {
		t.Fatalf("%d units of %d rows, %d committed", len(plan.Units), rows, len(plan.Committed))
	}
	cfg.Shard = fileset.Shard{Index: 2, Count: 3}
	again, err := job.PlanUnits(t.Context(), cfg)
	if err != nil || !slices.Equal(again.Units, plan.Units) {
		t.Fatalf("another shard plans other units: %v", err)
	}
}

// Processes of any number share one folder: killed (cancelled) at random
// and rerun with other numbers, two of them given the same shard at once,
// they leave the folder an uninterrupted single process writes, byte for
// byte, and predict each row at most once more than a unit a stop.
func TestSharedFolderResumesOnAnyNumberOfProcesses(t *testing.T) {
	mem := arrowtest.Allocator(t)
	_, m := setup(t, mem, 10)
	in := grouped(t, mem, t.TempDir(), 64, 2500, 700, 1801)
	const total = 5001
	cfg := config(mem, in, "", m)
	cfg.PartRows = 256
	ref := t.TempDir() + "/"
	cfg.Output = ref
	sum, err := job.RunUnits(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != total || !sum.Units.Sealed || sum.Units.Written != sum.Units.Total {
		t.Fatalf("reference run: %+v %+v", sum, sum.Units)
	}
	want := folderFiles(t, ref)
	unitRows := int64(cfg.PartRows + 64) // a unit ends on the row group that fills it

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	out := t.TempDir() + "/"
	var predicted atomic.Int64
	cfg.Output, cfg.Model = out, fakedev.RowCounter{Model: m, Rows: &predicted}
	stops := 0
	for round, n := range []int{2, 5, 1, 3, 2, 4, 3} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range n + 1 {
			shard := i % n // shard 0 twice at once
			ctx, cancel := context.WithCancel(t.Context())
			c := cfg
			c.Shard = fileset.Shard{Index: shard, Count: n}
			stopAt := int64(rng.IntN(total / n))
			last := round == 6
			c.Progress = func(done, _ int64) {
				if !last && done >= stopAt {
					cancel()
				}
			}
			wg.Go(func() {
				defer cancel()
				_, err := job.RunUnits(ctx, c)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, context.Canceled):
					stops++
				case err != nil:
					t.Errorf("round %d, shard %d/%d: %v", round, shard, n, err)
				}
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	filetest.EqualFiles(t, "shared folder", folderFiles(t, out), want)
	// Each stop loses the unit it was writing; two processes of one shard
	// may each write a unit once.
	if limit := total + int64(stops)*unitRows + total; predicted.Load() > limit {
		t.Fatalf("%d rows predicted for %d rows and %d stops, want at most %d", predicted.Load(), total, stops, limit)
	}
	t.Logf("%d stops, %d rows predicted for %d", stops, predicted.Load(), total)
}

// A folder bound to a job refuses another: an input replaced since (named),
// other settings; Overwrite replaces the other job's output.
func TestSharedFolderRefusesAnotherJob(t *testing.T) {
	mem := arrowtest.Allocator(t)
	_, m := setup(t, mem, 10)
	dir := t.TempDir()
	in := grouped(t, mem, dir, 64, 600, 300)
	cfg := config(mem, in, t.TempDir()+"/", m)
	cfg.PartRows = 128
	cfg.Shard = fileset.Shard{Index: 0, Count: 2}
	if _, err := job.RunUnits(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"in-0.parquet", "in-1.parquet"} {
		os.Remove(filepath.Join(dir, f))
	}
	grouped(t, mem, dir, 50, 600, 300) // the same rows in other row groups
	_, err := job.RunUnits(t.Context(), cfg)
	if !errors.Is(err, job.ErrChanged) || !strings.Contains(err.Error(), "in-0.parquet was replaced") {
		t.Fatalf("a replaced input: %v", err)
	}
	cfg.Overwrite = true
	cfg.Shard = fileset.Shard{Index: 0, Count: 1}
	sum, err := job.RunUnits(t.Context(), cfg)
	if err != nil || !sum.Units.Sealed || sum.Rows != 900 {
		t.Fatalf("overwrite: %+v %v", sum, err)
	}
	cfg.Overwrite = false
	cfg.BatchSize = 16
	if _, err := job.RunUnits(t.Context(), cfg); !errors.Is(err, job.ErrChanged) || !strings.Contains(err.Error(), "other settings") {
		t.Fatalf("another batch size: %v", err)
	}
	// A folder of files no run wrote is never written into.
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	cfg.Output = foreign + "/"
	if _, err := job.RunUnits(t.Context(), cfg); !errors.Is(err, job.ErrNotOutput) {
		t.Fatalf("a foreign folder: %v", err)
	}
}
