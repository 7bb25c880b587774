package job_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
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
	os.WriteFile(filepath.Join(out+".parts", "manifest.json"), manifest, 0o644)
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := arrowtest.ReadFile(t, out); !bytes.Equal(got, want) || sum.Rows == 0 {
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
	os.WriteFile(notDir, nil, 0o644)
	wide, _ := cpu.NewMLP([]int{width + 1, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	cases := []struct {
		name string
		edit func(c *job.Config)
		say  string
	}{
		{"missing feature column", func(c *job.Config) { c.FeatureColumn = "pixels" }, `no column "pixels"`},
		{"missing keep column", func(c *job.Config) { c.Keep = []string{"key"} }, `keep column "key"`},
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
	if got := outputIDs(t, filepath.Join(out, "*.parquet")); !slices.Equal(got, seqIDs(1003)) {
		t.Fatalf("the folder read as a dataset: %d rows, want 0..1002 once each", len(got))
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
	os.WriteFile(mine, []byte("mine"), 0o644)
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

// writeListFeatures writes ids start..start+n-1 and list<float32> features
// of width values to a Parquet file the way other writers do (no stored
// Arrow schema); row i's features come from feat (nil: a null row).
func writeListFeatures(t *testing.T, path string, start, n int, feat func(i int) []float32) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	lb := b.Field(1).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(start + i))
		if v := feat(i); v == nil {
			lb.AppendNull()
		} else {
			lb.Append(true)
			vb.AppendValues(v, nil)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(64)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// The first bad row ends the job with an error naming the file, the row
// in it and the column: a NaN (the CPU device refuses it), a ragged row, a
// null row; also when the run resumed part-way.
func TestBadRowNamesFileAndRow(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m, err := cpu.NewMLP([]int{width, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	good := func(int) []float32 { return make([]float32, width) }
	for _, c := range []struct {
		name string
		bad  []float32
		say  string
	}{
		{"nan", []float32{1, float32(math.NaN()), 0, 0, 0, 0, 0, 0}, "value 1 is NaN"},
		{"inf", []float32{0, 0, 0, float32(math.Inf(-1)), 0, 0, 0, 0}, "value 3 is -Inf"},
		{"ragged", []float32{1, 2, 3}, "3 values, want 8"},
		{"null", nil, "is null"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeListFeatures(t, filepath.Join(dir, "a.parquet"), 0, 200, good)
			writeListFeatures(t, filepath.Join(dir, "b.parquet"), 200, 300, func(i int) []float32 {
				if i == 223 {
					return c.bad
				}
				return good(i)
			})
			out := filepath.Join(dir, "out.parquet")
			cfg := config(mem, filepath.Join(dir, "*.parquet"), out, m)
			cfg.Model = m
			_, err := job.Run(t.Context(), cfg)
			where := filepath.Join(dir, "b.parquet") + `, row 223, column "features"`
			if err == nil || !strings.Contains(err.Error(), where) || !strings.Contains(err.Error(), c.say) {
				t.Fatalf("error %v; want it to say %q and %q", err, where, c.say)
			}
			// Resumed past the first parts, the row is named the same way.
			cfg.Resume = true
			cfg.Overwrite = false
			_, err = job.Run(t.Context(), cfg)
			if err == nil || !strings.Contains(err.Error(), where) {
				t.Fatalf("resumed: %v", err)
			}
		})
	}
}

// readAside returns the rows set aside: id, source file (base name), file
// row, column, and whether the reason mentions want.
func readAside(t *testing.T, path string) []string {
	t.Helper()
	ds, err := fileset.Read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var row []string
			for c := range int(rec.NumCols()) {
				v := rec.Column(c).ValueStr(i)
				if rec.ColumnName(c) == "source_file" {
					v = filepath.Base(v)
				}
				if rec.ColumnName(c) == "reason" {
					v = strings.Fields(v)[len(strings.Fields(v))-1]
				}
				row = append(row, v)
			}
			out = append(out, strings.Join(row, " "))
		}
	}
	return out
}

// With SetAside, rows that cannot be predicted go to their own file with
// their keys, source file, file row, column and reason, and the job goes
// on; interrupted and resumed, both outputs are byte for byte those of a
// run never interrupted.
func TestSetAsideBadRows(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m, err := cpu.NewMLP([]int{width, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	bad := map[int][]float32{7: {nan, 0, 0, 0, 0, 0, 0, 0}, 210: nil, 250: {1, 2, 3}, 323: {0, 0, 0, 0, 0, 0, 0, inf}, 324: {nan, nan, 0, 0, 0, 0, 0, 0}}
	dir := t.TempDir()
	feat := func(start int) func(int) []float32 {
		return func(i int) []float32 {
			if v, ok := bad[start+i]; ok {
				return v
			}
			return make([]float32, width)
		}
	}
	writeListFeatures(t, filepath.Join(dir, "a.parquet"), 0, 200, feat(0))
	writeListFeatures(t, filepath.Join(dir, "b.parquet"), 200, 300, feat(200))
	input := filepath.Join(dir, "*.parquet")
	var want []int64
	for id := range int64(500) {
		if _, ok := bad[int(id)]; !ok {
			want = append(want, id)
		}
	}
	wantAside := []string{
		"7 a.parquet 7 features NaN", "210 b.parquet 10 features null", "250 b.parquet 50 features 8",
		"323 b.parquet 123 features +Inf", "324 b.parquet 124 features NaN",
	}
	for _, kind := range []string{"file", "folder"} {
		t.Run(kind, func(t *testing.T) {
			out := func(name string) string {
				if kind == "folder" {
					return filepath.Join(dir, kind, name) + "/"
				}
				return filepath.Join(dir, kind, name+".parquet")
			}
			os.MkdirAll(filepath.Join(dir, kind), 0o755)
			cfg := func(name string) job.Config {
				c := config(mem, input, out(name), m)
				c.SetAside = filepath.Join(dir, kind, name+"-aside.parquet")
				return c
			}
			sum, err := job.Run(t.Context(), cfg("ref"))
			if err != nil {
				t.Fatal(err)
			}
			if sum.RowsIn != 500 || sum.Rows != 495 || sum.RowsSetAside != 5 {
				t.Fatalf("summary %+v", sum)
			}
			read := out("ref")
			if kind == "folder" {
				read = filepath.Join(read, "*.parquet")
			}
			if got := outputIDs(t, read); !slices.Equal(got, want) {
				t.Fatalf("predicted ids: %d, want the 495 good ones in order", len(got))
			}
			if got := readAside(t, cfg("ref").SetAside); !slices.Equal(got, wantAside) {
				t.Fatalf("set aside:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantAside, "\n"))
			}
			// Interrupted at several points, then resumed.
			for _, at := range []int64{100, 250, 400} {
				c := cfg("out")
				c.Resume = true
				interrupt(t, c, at)
			}
			c := cfg("out")
			c.Resume = true
			if sum, err := job.Run(t.Context(), c); err != nil || sum.RowsSetAside != 5 || sum.Rows != 495 {
				t.Fatalf("resume: %+v, %v", sum, err)
			}
			a := arrowtest.ReadFile(t, cfg("ref").SetAside)
			b := arrowtest.ReadFile(t, cfg("out").SetAside)
			if !bytes.Equal(a, b) {
				t.Fatal("the resumed set-aside file differs from the uninterrupted run's")
			}
			if kind == "file" {
				a = arrowtest.ReadFile(t, out("ref"))
				b = arrowtest.ReadFile(t, out("out"))
				if !bytes.Equal(a, b) {
					t.Fatal("the resumed output differs from the uninterrupted run's")
				}
			} else if !maps.EqualFunc(folderFiles(t, out("out")), folderFiles(t, out("ref")), bytes.Equal) {
				t.Fatal("the resumed folder differs from the uninterrupted run's")
			}
		})
	}
}

// The job owns its batch size: a WithBatchSize among Config.Predict's
// options does not change the batches the device sees (the resume
// fingerprint and the part sizes are the job's).
func TestPredictOptionsKeepTheJobsBatchSize(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 500)
	cfg := config(mem, input, filepath.Join(t.TempDir(), "out.parquet"), m)
	cfg.BatchSize = 100
	cfg.Predict = []predict.Option{predict.WithBatchSize(7)}
	sum, err := job.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 500 || sum.Batches != 5 {
		t.Fatalf("%d rows in %d batches, want 500 in 5 of 100", sum.Rows, sum.Batches)
	}
}
