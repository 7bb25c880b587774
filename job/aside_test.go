package job_test

import (
	"bytes"
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

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
)

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
	writeForeign(t, path, rec)
}

// writeForeign writes rec to a Parquet file of row groups of 64 rows, as
// other writers do: through arrow-go's writer, with no stored Arrow
// schema.
func writeForeign(t *testing.T, path string, rec arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(64)), pqarrow.DefaultWriterProps())
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

// A folder output whose every row was set aside reads back, as a folder,
// as the empty dataset it is — not as the rows set aside, which lie in
// the parts folder beside it — and a stale part the manifest does not
// name is never data.
func TestFolderOfRowsAllSetAside(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m, err := cpu.NewMLP([]int{width, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeListFeatures(t, filepath.Join(dir, "a.parquet"), 0, 300, func(int) []float32 { return []float32{float32(math.NaN())} })
	out := filepath.Join(dir, "out") + "/"
	cfg := config(mem, filepath.Join(dir, "a.parquet"), out, m)
	cfg.SetAside = filepath.Join(dir, "aside.parquet")
	sum, err := job.Run(t.Context(), cfg)
	if err != nil || sum.Rows != 0 || sum.RowsSetAside != 300 {
		t.Fatalf("%+v, %v", sum, err)
	}
	count := func() int64 {
		t.Helper()
		ds, err := fileset.Read([]string{out})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Schema().String(); !strings.Contains(got, "probabilities") {
			t.Fatalf("the folder reads with schema %s, not the predictions'", got)
		}
		n, err := ds.Count()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("the folder of no predicted rows reads as %d rows", n)
	}
	// A stale part of an earlier run beside the manifest.
	data := arrowtest.ReadFile(t, filepath.Join(out, "part-00001.parquet"))
	stale := filepath.Join(out, "part-00007.parquet")
	if err := os.WriteFile(stale, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("a stale part beside the manifest is read: %d rows", n)
	}
}
