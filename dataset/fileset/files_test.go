package fileset_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// writeFile writes rows [start, start+rows) of UniformTensors(width 4) to
// path in records of chunk rows (Parquet row groups, IPC batches).
func writeFile(t testing.TB, mem memory.Allocator, path string, start, rows, chunk int) {
	t.Helper()
	w, err := sink.Create(path, dataset.TensorSchema(4), sink.WithAllocator(mem), sink.WithRowGroupRows(int64(chunk)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.Skip(dataset.UniformTensors(mem, start+rows, 4, chunk, 1), int64(start)).Batches(mem, chunk)); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func ids(t *testing.T, ds *dataset.Dataset) []int64 {
	t.Helper()
	var out []int64
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, arrowtest.Int64s(t, "id", rec)...)
	}
	return out
}

func TestFilesEveryFormatGlobAndShards(t *testing.T) {
	for _, ext := range []string{"parquet", "arrow", "arrows"} {
		t.Run(ext, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			dir := t.TempDir()
			// Three files, written out of name order, 0..249 in total.
			writeFile(t, mem, filepath.Join(dir, "b."+ext), 100, 120, 25)
			writeFile(t, mem, filepath.Join(dir, "a."+ext), 0, 100, 30)
			writeFile(t, mem, filepath.Join(dir, "c."+ext), 220, 30, 7)
			pattern := filepath.Join(dir, "*."+ext)
			ds, err := fileset.Read([]string{pattern}, fileset.WithAllocator(mem), fileset.WithReadRows(16))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(t, ds); !slices.Equal(got, arrowtest.Seq(250)) {
				t.Fatalf("ids %v", got)
			}
			for n := 1; n <= 5; n++ { // fewer and more shards than files
				var all []int64
				for i := range n {
					sh, err := fileset.Read([]string{pattern}, fileset.WithAllocator(mem), fileset.WithShard(fileset.Shard{Index: i, Count: n}))
					if err != nil {
						t.Fatal(err)
					}
					part := ids(t, sh)
					if n > 1 && len(part) == 250 {
						t.Fatalf("shard %d/%d holds every row", i, n)
					}
					all = append(all, part...)
				}
				slices.Sort(all)
				if !slices.Equal(all, arrowtest.Seq(250)) {
					t.Fatalf("%d shards together hold %d rows, not each of 0..249 once", n, len(all))
				}
			}
		})
	}
}

func TestFilesProjectionAndCSV(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.parquet")
	writeFile(t, mem, path, 0, 10, 4)
	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem), fileset.WithColumns("features", "id"))
	if err != nil {
		t.Fatal(err)
	}
	if s := ds.Schema(); s.NumFields() != 2 || s.Field(0).Name != "features" || s.Field(1).Name != "id" {
		t.Fatalf("projected schema %s", s)
	}
	if got := ids(t, ds); !slices.Equal(got, arrowtest.Seq(10)) {
		t.Fatalf("ids %v", got)
	}
	if _, err := fileset.Read([]string{path}, fileset.WithColumns("nope")); !errors.Is(err, dataset.ErrColumn) {
		t.Fatalf("missing column: %v", err)
	}

	csvPath := filepath.Join(dir, "t.csv")
	var b strings.Builder
	b.WriteString("id,f0,f1,name\n")
	for i := range 23 {
		fmt.Fprintf(&b, "%d,%d.5,%d,n%d\n", i, i, -i, i)
	}
	if err := os.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	inferred, err := fileset.Read([]string{csvPath}, fileset.WithAllocator(mem), fileset.WithReadRows(5), fileset.WithColumns("id", "f0", "f1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, inferred); !slices.Equal(got, arrowtest.Seq(23)) {
		t.Fatalf("csv ids %v", got)
	}
	g, err := dataset.Gather(inferred, mem, "features", "f0", "f1")
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range g.Records() {
		if err != nil {
			t.Fatal(err)
		}
		x, _ := tensor.Float32(rec.Column(1), 2)
		if first := arrowtest.Int64s(t, "id", rec)[0]; x[0] != float32(first)+0.5 || x[1] != -float32(first) {
			t.Fatalf("row %d gathered %v", first, x[:2])
		}
	}
	// With a given schema, the types are the caller's, not inferred.
	given := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "f0", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f1", Type: arrow.PrimitiveTypes.Float32}, {Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	typed, err := fileset.Read([]string{csvPath}, fileset.WithAllocator(mem), fileset.WithCSVSchema(given), fileset.WithReadRows(7))
	if err != nil {
		t.Fatal(err)
	}
	if !typed.Schema().Equal(given) {
		t.Fatalf("schema %s", typed.Schema())
	}
	if got := ids(t, typed); !slices.Equal(got, arrowtest.Seq(23)) {
		t.Fatalf("typed csv ids %v", got)
	}
	var sharded []int64
	for i := range 3 {
		sh, err := fileset.Read([]string{csvPath}, fileset.WithAllocator(mem), fileset.WithReadRows(5), fileset.WithShard(fileset.Shard{Index: i, Count: 3}))
		if err != nil {
			t.Fatal(err)
		}
		sharded = append(sharded, ids(t, sh)...)
	}
	slices.Sort(sharded)
	if !slices.Equal(sharded, arrowtest.Seq(23)) {
		t.Fatalf("csv shards hold %v", sharded)
	}
}

// A plain Parquet file (no stored Arrow schema) returns a fixed-size list
// as a list; AsTensor takes it back zero-copy and rejects ragged rows.
func TestAsTensorFromPlainParquet(t *testing.T) {
	testAsTensorFromPlainParquet(t, 9, parquet.NewWriterProperties())
}

// Float columns in BYTE_STREAM_SPLIT encoding, as other writers make them
// for floats: Arrow v15 read such a file as 0 rows without an error.
func TestByteStreamSplitFloats(t *testing.T) {
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false),
		parquet.WithEncodingFor("features.list.element", parquet.Encodings.ByteStreamSplit))
	path := testAsTensorFromPlainParquet(t, 300, props)
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cc.Encodings(), parquet.Encodings.ByteStreamSplit) {
		t.Fatalf("features written in %v, not BYTE_STREAM_SPLIT", cc.Encodings())
	}
}

func testAsTensorFromPlainParquet(t *testing.T, rows int, props *parquet.WriterProperties) (path string) {
	t.Helper()
	mem := arrowtest.Allocator(t)
	path = filepath.Join(t.TempDir(), "plain.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := pqarrow.NewFileWriter(dataset.TensorSchema(4), f, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		t.Fatal(err)
	}
	var want []float32
	for rec, err := range dataset.UniformTensors(mem, rows, 4, 64, 3).Records() {
		if err != nil {
			t.Fatal(err)
		}
		x, _ := tensor.Float32(rec.Column(1), 4)
		want = append(want, x...)
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if id := ds.Schema().Field(1).Type.ID(); id != arrow.LIST {
		t.Fatalf("plain Parquet gave %s; the test expects a list", ds.Schema().Field(1).Type)
	}
	tds, err := dataset.AsTensor(ds, "features", 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []float32
	for rec, err := range tds.Batches(mem, 4) {
		if err != nil {
			t.Fatal(err)
		}
		x, err := tensor.Float32(rec.Column(1), 4)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x...)
	}
	if len(got) != 4*rows || !slices.Equal(got, want) {
		t.Fatalf("read %d values, want %d; or the values differ", len(got), 4*rows)
	}
	if _, err := dataset.AsTensor(ds, "features", 4); err != nil {
		t.Fatal(err)
	}
	bad, _ := dataset.AsTensor(ds, "features", 3)
	for _, err := range bad.Records() {
		if !errors.Is(err, tensor.ErrWidth) || !strings.Contains(err.Error(), `row 0, column "features": tensor: wrong row width: 4 values, want 3`) {
			t.Fatalf("ragged: %v", err)
		}
	}
	return path
}

func TestFilesBadInput(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	writeFile(t, mem, good, 0, 50, 10)
	data := arrowtest.ReadFile(t, good)
	goodArrow := filepath.Join(dir, "good.arrow")
	writeFile(t, mem, goodArrow, 0, 50, 10)
	arrowData := arrowtest.ReadFile(t, goodArrow)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := slices.Clone(data)
	copy(corrupt[len(corrupt)-40:], "garbage garbage garbage garbage garbage!")
	cases := []struct {
		name    string
		pattern string
		say     string
	}{
		{"missing file", filepath.Join(dir, "nope.parquet"), "no such file"},
		{"empty glob", filepath.Join(dir, "*.nothing"), "matches nothing"},
		{"truncated parquet", write("trunc.parquet", data[:len(data)/2]), "trunc.parquet"},
		{"corrupt parquet", write("corrupt.parquet", corrupt), "corrupt.parquet"},
		{"not parquet", write("text.parquet", []byte("hello, world")), "text.parquet"},
		{"truncated arrow", write("trunc.arrow", arrowData[:len(arrowData)/2]), "trunc.arrow"},
		{"csv column count", write("bad.csv", []byte("a,b\n1,2\n3\n")), "bad.csv"},
		{"csv header only", write("header.csv", []byte("a,b\n")), "header and no rows"},
		{"unknown extension", write("x.json", []byte("{}")), "extension"},
	}
	for _, c := range cases {
		ds, err := fileset.Read([]string{c.pattern}, fileset.WithAllocator(mem))
		if err == nil {
			_, err = ds.Count()
		}
		if err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: err %v, want it to say %q", c.name, err, c.say)
		}
	}
	for _, s := range []string{"1", "a/b", "3/3", "-1/2", "0/0"} {
		if _, err := fileset.ParseShard(s); !errors.Is(err, fileset.ErrShard) {
			t.Errorf("shard %q: err %v", s, err)
		}
	}
	if sh, err := fileset.ParseShard("2/5"); err != nil || sh != (fileset.Shard{Index: 2, Count: 5}) {
		t.Errorf("2/5: %v %v", sh, err)
	}
}
