package dpbeam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

const (
	width     = 64
	totalRows = 50_003
)

// testSessions counts the sessions of models loaded by the "counting"
// loader, across every DoFn instance of the process.
var testSessions struct{ started, shutDown atomic.Int64 }

func init() {
	RegisterLoader("counting", func(path string) (*Model, error) {
		m, err := loadMLP(path)
		if err != nil {
			return nil, err
		}
		m.Device = countingModel{m.Device}
		return m, nil
	})
}

type countingModel struct{ device.Model }

func (m countingModel) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := m.Model.Start(ctx, cfg)
	if err == nil {
		testSessions.started.Add(1)
		s = countingSession{s}
	}
	return s, err
}

type countingSession struct{ device.Session }

func (s countingSession) Shutdown(ctx context.Context) error {
	testSessions.shutDown.Add(1)
	return s.Session.Shutdown(ctx)
}

// inputs writes 50,003 rows (ids 0..50,002) to three Parquet files: 20,000
// rows in row groups of 4,096, 20,000 in a single row group, and 10,003 in
// groups of 1,000; and a model. It returns the folder.
func inputs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	all := dataset.UniformTensors(memory.DefaultAllocator, totalRows, width, 4096, 5)
	parts := []struct {
		name       string
		skip, take int64
		group      int64
	}{{"a.parquet", 0, 20_000, 4096}, {"b.parquet", 20_000, 20_000, 20_000}, {"c.parquet", 40_000, 10_003, 1000}}
	for _, p := range parts {
		w, err := sink.Create(filepath.Join(dir, p.name), all.Schema(), sink.WithRowGroupRows(p.group))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Copy(w, dataset.Take(dataset.Skip(all, p.skip), p.take).Records()); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cpu.NewMLP([]int{width, 32, 10}, cpu.ReLU, rand.New(rand.NewPCG(4, 4)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(filepath.Join(dir, "model.dpmlp")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// prediction is one output row.
type prediction struct {
	class int64
	probs string
}

// readPredictions reads id → prediction from Parquet files, failing on an
// id seen twice.
func readPredictions(t *testing.T, pattern string) map[int64]prediction {
	t.Helper()
	ds, err := fileset.Read([]string{pattern})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]prediction{}
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Schema()
		ids := rec.Column(s.FieldIndices("id")[0]).(*array.Int64)
		classes := rec.Column(s.FieldIndices("class")[0]).(*array.Int64)
		probs := rec.Column(s.FieldIndices("probabilities")[0]).(*array.FixedSizeList)
		for i := range int(rec.NumRows()) {
			id := ids.Value(i)
			if _, dup := out[id]; dup {
				t.Fatalf("%s: id %d twice", pattern, id)
			}
			out[id] = prediction{class: classes.Value(i), probs: probs.ValueStr(i)}
		}
	}
	return out
}

// reference runs the core CLI, built from the parent module, over the
// same inputs into one file.
func reference(t *testing.T, dir string) map[int64]prediction {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "drainpipe")
	if out, err := exec.Command("go", "build", "-C", "..", "-o", bin, "./cmd/drainpipe").CombinedOutput(); err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "ref.parquet")
	cmd := exec.Command(bin, "predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", filepath.Join(dir, "*.parquet"),
		"--output", out, "--keep", "id", "--batch-size", "256", "--quiet")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("drainpipe predict: %v\n%s", err, b)
	}
	return readPredictions(t, out)
}

// pipelineTimeout bounds a test pipeline's run on Prism: past it, the
// pipeline is taken as hung and the test fails.
const pipelineTimeout = 5 * time.Minute

// run builds and runs the pipeline on Prism (in process); a pipeline that
// has not finished within pipelineTimeout fails the test.
func run(t *testing.T, cfg Config) error {
	t.Helper()
	p, s := beamPipeline(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), pipelineTimeout)
	defer cancel()
	_, err := executePrism(ctx, p, s)
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("the pipeline did not finish within %v: %v", pipelineTimeout, err)
	}
	return err
}

func beamPipeline(cfg Config) (*beam.Pipeline, beam.Scope) {
	p, s := beam.NewPipelineWithRoot()
	Predict(s, cfg)
	return p, s
}

func executePrism(ctx context.Context, p *beam.Pipeline, _ beam.Scope) (beam.PipelineResult, error) {
	return prism.Execute(ctx, p)
}

func TestMain(m *testing.M) {
	beam.Init()
	os.Exit(m.Run())
}

// The pipeline on Prism writes exactly the core CLI's predictions, every
// row once, a file a shard, the manifest last; every session started is
// shut down.
func TestPipelineMatchesJob(t *testing.T) {
	dir := inputs(t)
	want := reference(t, dir)
	out := filepath.Join(t.TempDir(), "out")
	started, down := testSessions.started.Load(), testSessions.shutDown.Load()
	cfg := Config{Inputs: []string{filepath.Join(dir, "*.parquet")}, Model: filepath.Join(dir, "model.dpmlp"), Loader: "counting",
		Output: out, Keep: []string{"id"}, BatchSize: 256, PartRows: 8192}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	got := readPredictions(t, filepath.Join(out, "part-*.parquet"))
	if len(got) != totalRows || len(want) != totalRows {
		t.Fatalf("%d rows from the pipeline, %d from the job, want %d", len(got), len(want), totalRows)
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("id %d: pipeline %+v, job %+v", id, got[id], w)
		}
	}
	var man job.UnitManifest
	data, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	// a: 20,000 rows in 5 groups → 3 units; b: one group → 1; c: 11 groups → 2.
	names := make([]string, len(man.Parts))
	for i, f := range man.Parts {
		names[i] = f.File
	}
	wantNames := []string{"part-00000-000000000000.parquet", "part-00000-000000008192.parquet", "part-00000-000000016384.parquet",
		"part-00001-000000000000.parquet", "part-00002-000000000000.parquet", "part-00002-000000009000.parquet"}
	if man.Rows != totalRows || !slices.Equal(names, wantNames) {
		t.Errorf("manifest: %d rows, files %v; want %d, %v", man.Rows, names, totalRows, wantNames)
	}
	if _, err := os.Stat(filepath.Join(out, SuccessName)); err != nil {
		t.Errorf("no %s: %v", SuccessName, err)
	}
	s, d := testSessions.started.Load()-started, testSessions.shutDown.Load()-down
	if s == 0 || s != d {
		t.Errorf("%d sessions started, %d shut down", s, d)
	}
	t.Logf("%d shards, %d sessions started and shut down", len(man.Parts), s)
}

// A unit whose first attempt fails: Prism does not retry a failed bundle,
// so the pipeline fails with the unit's error, and no manifest or
// _SUCCESS claims the output complete. The input is one unit (b.parquet's
// 20,000 rows, under PartRows): a pipeline that fails while other bundles
// still run trips a data race inside Beam's harness now and then (see
// plan), which units of 8,192 rows did.
func TestFailedShardFailsThePipeline(t *testing.T) {
	dir := inputs(t)
	out := filepath.Join(t.TempDir(), "out")
	// Over the output of an earlier complete run, whose marker must go.
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ManifestName, SuccessName} {
		if err := os.WriteFile(filepath.Join(out, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	fault := func(sh job.Unit) error {
		mu.Lock()
		defer mu.Unlock()
		attempts[sh.Name()]++
		if attempts[sh.Name()] == 1 {
			return fmt.Errorf("injected failure of %s", sh.Name())
		}
		return nil
	}
	testFault.Store(&fault)
	defer testFault.Store(nil)
	err := run(t, Config{Inputs: []string{filepath.Join(dir, "b.parquet")}, Model: filepath.Join(dir, "model.dpmlp"),
		Output: out, Keep: []string{"id"}, PartRows: 1 << 15, Overwrite: true})
	mu.Lock()
	retried := attempts["part-00000-000000000000.parquet"] > 1
	mu.Unlock()
	t.Logf("the runner retried the failed unit: %v", retried)
	if retried {
		// A runner that retries: every row exactly once.
		if err != nil {
			t.Fatal(err)
		}
		if got := readPredictions(t, filepath.Join(out, "part-*.parquet")); len(got) != 20_000 {
			t.Fatalf("%d rows after a retry, want 20,000", len(got))
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "injected failure of part-00000-000000000000.parquet") {
		t.Fatalf("pipeline: %v, want the injected failure", err)
	}
	for _, name := range []string{ManifestName, SuccessName} {
		if _, err := os.Stat(filepath.Join(out, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a failed pipeline: %v", name, err)
		}
	}
}

// Inputs, model and output on an S3-compatible server (and none on the
// workers' disk): the pipeline expands, plans and reads by URL, writes its
// shards, manifest and _SUCCESS as objects, and the predictions are those
// of a job on local files, every row once.
func TestPipelineOnS3(t *testing.T) {
	dir := inputs(t)
	want := reference(t, dir)
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "beam")
	// The inputs and the model are only on the server: the workers'
	// folder holds none of them.
	for _, name := range []string{"a.parquet", "b.parquet", "c.parquet", "model.dpmlp"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bucket, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Inputs: []string{srv.URL("beam", "*.parquet")}, Model: srv.URL("beam", "model.dpmlp"),
		Output: srv.URL("beam", "out/"), Keep: []string{"id"}, BatchSize: 256, PartRows: 8192}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(bucket, "out")
	for _, name := range []string{SuccessName, ManifestName} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Fatalf("the output on S3: %v", err)
		}
	}
	got := readPredictions(t, filepath.Join(out, "part-*.parquet"))
	if len(got) != totalRows {
		t.Fatalf("%d rows from the pipeline, want %d", len(got), totalRows)
	}
	for id, w := range want {
		if got[id] != w {
			t.Fatalf("id %d: pipeline %+v, job %+v", id, got[id], w)
		}
	}
	// The output folder reads back by URL as the dataset it is.
	ds, err := fileset.Read([]string{srv.URL("beam", "out/")})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ds.Count(); err != nil || n != totalRows {
		t.Fatalf("the output folder by URL: %d rows, %v", n, err)
	}
}

// An input replaced while the pipeline runs, between the plan and a
// shard's read, fails that shard with storage.ErrChanged: the shards of
// one input read the version the plan saw, never a mix of two (a store
// that honours If-Match lets each shard read a consistent new version,
// so only the plan's version, carried to the shard, can tell).
func TestInputReplacedMidPipelineFails(t *testing.T) {
	dir := inputs(t)
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "beam")
	put := func(name string, data []byte) {
		o := storage.NewOpener()
		defer o.Close()
		if err := o.WriteFile(context.Background(), srv.URL("beam", name), data, true); err != nil {
			t.Error(err)
		}
	}
	for _, name := range []string{"a.parquet", "model.dpmlp"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		put(name, data)
	}
	// The new version: the same layout (20,000 rows in groups of 4,096),
	// other values.
	other := filepath.Join(t.TempDir(), "a.parquet")
	all := dataset.UniformTensors(memory.DefaultAllocator, 20_000, width, 4096, 6)
	w, err := sink.Create(other, all.Schema(), sink.WithRowGroupRows(4096))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, all.Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	replacement, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	fault := func(sh job.Unit) error {
		if sh.FirstRow > 0 {
			once.Do(func() { put("a.parquet", replacement) })
		}
		return nil
	}
	testFault.Store(&fault)
	defer testFault.Store(nil)
	cfg := Config{Inputs: []string{srv.URL("beam", "a.parquet")}, Model: srv.URL("beam", "model.dpmlp"),
		Output: srv.URL("beam", "out/"), Keep: []string{"id"}, BatchSize: 256, PartRows: 8192}
	err = run(t, cfg)
	if err == nil || !strings.Contains(err.Error(), storage.ErrChanged.Error()) || !strings.Contains(err.Error(), "s3://beam/a.parquet") {
		t.Fatalf("pipeline over an input replaced mid-run: %v, want the input named as changed", err)
	}
	if _, err := os.Stat(filepath.Join(bucket, "out", SuccessName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("_SUCCESS over a mix of versions: %v", err)
	}
}

// plan runs the pipeline's first step, which binds the output folder to
// the job, on its own: a refusal there is the pipeline's error. (A
// pipeline failed on Prism trips a data race inside Beam's harness,
// closing a channel another goroutine sends on, now and then.)
func plan(t *testing.T, cfg Config) error {
	t.Helper()
	fn := &planFn{Cfg: cfg.withDefaults()}
	if err := fn.Setup(); err != nil {
		return err
	}
	defer fn.Teardown()
	return fn.ProcessElement(t.Context(), nil, func(job.Unit) {})
}

// A rerun over an earlier run's output: refused without Overwrite (the
// earlier files untouched); with it, the earlier shards go before any
// unit runs, so a rerun with another PartRows leaves no stale unit
// beside its own (a glob reader would read those rows twice). A folder
// holding files no run wrote is refused either way.
func TestRerunReplacesTheOutput(t *testing.T) {
	dir := inputs(t)
	out := filepath.Join(t.TempDir(), "out")
	cfg := Config{Inputs: []string{filepath.Join(dir, "*.parquet")}, Model: filepath.Join(dir, "model.dpmlp"),
		Output: out, Keep: []string{"id"}, BatchSize: 256, PartRows: 8192}
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(out, "part-*.parquet"))
	cfg.PartRows = 1 << 20
	if err := plan(t, cfg); err == nil || !strings.Contains(err.Error(), "--overwrite replaces") {
		t.Fatalf("a rerun without Overwrite: %v", err)
	}
	if after, _ := filepath.Glob(filepath.Join(out, "part-*.parquet")); !slices.Equal(after, before) {
		t.Fatalf("a refused rerun changed the folder: %v, was %v", after, before)
	}
	cfg.Overwrite = true
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "part-*.parquet"))
	if len(files) != 3 || len(before) != 6 {
		t.Fatalf("%d shard files after a rerun of 3 shards (the first run wrote %d)", len(files), len(before))
	}
	if got := readPredictions(t, filepath.Join(out, "part-*.parquet")); len(got) != totalRows {
		t.Fatalf("a glob over the rerun's folder reads %d rows, want %d", len(got), totalRows)
	}
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := plan(t, cfg); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("a folder holding a file no run wrote: %v", err)
	}
}
