package sink_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// predictions builds a record like the cpu device's output with keys: a
// non-nullable fixed_size_list with non-nullable elements, the shape Arrow
// v15 wrote to Parquet as all nulls (apache/arrow-go#584).
func predictions(t *testing.T, mem interface {
	Allocate(int) []byte
	Reallocate(int, []byte) []byte
	Free([]byte)
}, rows int) arrow.RecordBatch {
	t.Helper()
	ids := array.NewInt64Builder(mem)
	defer ids.Release()
	buf, v := tensor.NewBuffer(mem, rows*3)
	for i := range rows {
		ids.Append(int64(100 + i))
		v[3*i], v[3*i+1], v[3*i+2] = float32(i), 0.5, -float32(i)
	}
	idArr := ids.NewArray()
	defer idArr.Release()
	probs := tensor.NewFixedSizeList(buf, rows, 3)
	defer probs.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "probabilities", Type: probs.DataType()}, // non-nullable field
	}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{idArr, probs}, int64(rows))
}

// readBack reads a file of predictions (id, probabilities of 3 classes)
// with the dataset reader: the ids and the probabilities, row-major.
func readBack(t *testing.T, mem memory.Allocator, path string) (ids []int64, values []float32) {
	t.Helper()
	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	for r, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		x, err := tensor.Float32(r.Column(1), 3)
		if err != nil {
			t.Fatalf("probabilities read back: %v", err)
		}
		values = append(values, x...)
		ids = append(ids, arrowtest.Int64s(t, "id", r)...)
	}
	return ids, values
}

func TestRoundTripKeepsTensorValues(t *testing.T) {
	for _, name := range []string{"out.parquet", "out.arrow", "out.arrows"} {
		t.Run(name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			rec := predictions(t, mem, 5)
			defer rec.Release()
			path := filepath.Join(t.TempDir(), name)
			w, err := sink.Create(path, rec.Schema(), sink.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("the output is visible before Commit")
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			ids, got := readBack(t, mem, path)
			want, _ := tensor.Float32(rec.Column(1), 3)
			if !slices.Equal(got, want) || !slices.Equal(ids, []int64{100, 101, 102, 103, 104}) {
				t.Fatalf("read back ids %v, values %v; want %v", ids, got, want)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Fatalf("temporary files left: %v", entries)
			}
		})
	}
}

func TestRefusesToOverwriteAndAborts(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := predictions(t, mem, 2)
	defer rec.Release()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.parquet")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Create(path, rec.Schema()); !errors.Is(err, sink.ErrExists) {
		t.Fatalf("err %v, want ErrExists", err)
	}
	w, err := sink.Create(path, rec.Schema(), sink.WithOverwrite(true), sink.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if b := arrowtest.ReadFile(t, path); string(b) != "old" {
		t.Fatal("Abort touched the destination")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("Abort left %v", entries)
	}
	if err := w.Write(rec); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("write after abort: %v", err)
	}
	if _, err := sink.Create(filepath.Join(dir, "out.txt"), rec.Schema()); !errors.Is(err, sink.ErrFormat) {
		t.Fatalf("unknown extension: %v", err)
	}
	if _, err := sink.Create(filepath.Join(path, "nested.parquet"), rec.Schema()); err == nil {
		t.Fatal("an output under a regular file was accepted")
	}
}

// Parquet row groups depend on the rows written, not on how they arrive in
// records: the same rows in one record or in records of 1 to 700 rows give
// the same row groups, of the sink's size (1<<20 leaf values).
func TestParquetRowGroupsIndependentOfRecordSizes(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const rows = 300_000 // 4 leaf values a row: one full row group and a part
	whole := predictions(t, mem, rows)
	defer whole.Release()
	groups := func(sizes func(int) int, opts ...sink.Option) []int64 {
		path := writeInRecords(t, whole, sizes, append(opts, sink.WithAllocator(mem))...)
		// Every value as written: arrow-go's writer, handed a tensor
		// slice at an offset, writes its parent's first rows instead.
		ids, values := readBack(t, mem, path)
		want, _ := tensor.Float32(whole.Column(1), 3)
		if len(ids) != rows || !slices.Equal(ids, arrowtest.Int64s(t, "id", whole)) {
			t.Fatalf("%d ids read back, want %d in order", len(ids), rows)
		}
		for i := range values {
			if math.Float32bits(values[i]) != math.Float32bits(want[i]) {
				t.Fatalf("row %d (id %d): value %d is %v, want %v", i/3, ids[i/3], i%3, values[i], want[i])
			}
		}
		return rowGroups(t, path)
	}
	want := []int64{1 << 18, rows - 1<<18}
	if got := groups(func(int) int { return rows }); !slices.Equal(got, want) {
		t.Fatalf("one record: row groups %v, want %v", got, want)
	}
	if got := groups(func(off int) int { return 1 + off*7919%700 }); !slices.Equal(got, want) {
		t.Fatalf("records of 1..700 rows: row groups %v, want %v", got, want)
	}
	got := groups(func(int) int { return 777 }, sink.WithRowGroupRows(100_000))
	if !slices.Equal(got, []int64{100_000, 100_000, 100_000}) {
		t.Fatalf("WithRowGroupRows(100000): row groups %v", got)
	}
	// Records of the job's batch size, across group boundaries.
	got = groups(func(int) int { return 256 }, sink.WithRowGroupRows(1000))
	if len(got) != 300 || got[0] != 1000 {
		t.Fatalf("WithRowGroupRows(1000), records of 256: row groups %v", got[:3])
	}
}

// An empty record writes nothing of its own: before rows, the file is
// their row groups alone; with no row at all, it is one empty row group,
// and reads back as no rows of the schema.
func TestParquetEmptyRecords(t *testing.T) {
	mem := arrowtest.Allocator(t)
	whole := predictions(t, mem, 1000)
	defer whole.Release()
	empty := whole.NewSlice(0, 0)
	defer empty.Release()
	for _, c := range []struct {
		name   string
		recs   []arrow.RecordBatch
		groups []int64
	}{
		{"empty only", []arrow.RecordBatch{empty}, []int64{0}},
		{"empty, then rows", []arrow.RecordBatch{empty, whole, empty}, []int64{1000}},
		{"nothing", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.parquet")
			w, err := sink.Create(path, whole.Schema(), sink.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range c.recs {
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := rowGroups(t, path); !slices.Equal(got, c.groups) {
				t.Fatalf("row groups %v, want %v", got, c.groups)
			}
			if ids, _ := readBack(t, mem, path); len(ids) != int(sum(c.groups)) {
				t.Fatalf("%d rows read back, want %d", len(ids), sum(c.groups))
			}
		})
	}
}

func sum(v []int64) (s int64) {
	for _, x := range v {
		s += x
	}
	return s
}

// rowGroups returns the rows of each row group of the Parquet file at path.
func rowGroups(t *testing.T, path string) []int64 {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var got []int64
	for g := range pf.NumRowGroups() {
		got = append(got, pf.MetaData().RowGroup(g).NumRows())
	}
	return got
}

// writeInRecords writes whole to a Parquet file in records of the sizes
// sizes gives (from each record's first row) and returns its path.
func writeInRecords(t *testing.T, whole arrow.RecordBatch, sizes func(off int) int, opts ...sink.Option) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.parquet")
	w, err := sink.Create(path, whole.Schema(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	rows := int(whole.NumRows())
	for off := 0; off < rows; {
		n := min(sizes(off), rows-off)
		slice := whole.NewSlice(int64(off), int64(off+n))
		err := w.Write(slice)
		slice.Release()
		if err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}
