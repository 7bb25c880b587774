package fileset_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
)

// CSV types come from a sample of rows; a later value that does not parse
// is an error naming the file, its row and column.
func TestCSVTypesFromSample(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "late.csv")
	var b strings.Builder
	b.WriteString("id,x,flag,mixed,empty\n")
	for i := range 30 {
		x, mixed := strconv.Itoa(i), "1"
		if i == 25 {
			x, mixed = "2.5", "yes"
		}
		fmt.Fprintf(&b, "%d,%s,%v,%s,\n", i, x, i%2 == 0, mixed)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem), fileset.WithReadRows(4))
	if err != nil {
		t.Fatal(err)
	}
	want := "id: type=int64, nullable|x: type=float64, nullable|flag: type=bool, nullable|mixed: type=utf8, nullable|empty: type=utf8, nullable"
	var got []string
	for _, f := range ds.Schema().Fields() {
		got = append(got, fmt.Sprintf("%s: type=%s, nullable", f.Name, f.Type))
	}
	if strings.Join(got, "|") != want {
		t.Fatalf("inferred %v", got)
	}
	if n, err := ds.Count(); err != nil || n != 30 {
		t.Fatalf("%d rows, %v", n, err)
	}

	// From the first 10 rows only, x looks like an integer column.
	ds, err = fileset.Read([]string{path}, fileset.WithAllocator(mem), fileset.WithReadRows(4), fileset.WithCSVSample(10))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ds.Count()
	if !errors.Is(err, fileset.ErrCSVValue) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), `line 27, column "x": "2.5" is not an int64`) {
		t.Fatalf("a late float in an int column: %v", err)
	}

	// A given non-nullable column with an empty value.
	given := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "x", Type: arrow.PrimitiveTypes.Float32},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean}, {Name: "mixed", Type: arrow.BinaryTypes.String},
		{Name: "empty", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	ds, err = fileset.Read([]string{path}, fileset.WithAllocator(mem), fileset.WithCSVSchema(given))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Count(); !errors.Is(err, fileset.ErrCSVValue) || !strings.Contains(err.Error(), `line 2, column "empty": empty, and the column is not nullable`) {
		t.Fatalf("null in a non-nullable column: %v", err)
	}
}

// Origins name, for every row a Files dataset yields, its file and the row
// in it, across files, sharded row groups and record batches, and CSV
// chunks.
func TestOrigins(t *testing.T) {
	mem := arrowtest.Allocator(t)
	for _, ext := range []string{"parquet", "arrow", "arrows", "csv"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			starts := map[string]int64{}
			for i, n := range []int{37, 50} {
				path := filepath.Join(dir, fmt.Sprintf("f%d.%s", i, ext))
				start := int64(i * 1000)
				starts[path] = start
				if ext == "csv" {
					var b strings.Builder
					b.WriteString("id\n")
					for r := range n {
						fmt.Fprintf(&b, "%d\n", start+int64(r))
					}
					if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				w, err := sink.Create(path, arrowtest.IDSchema, sink.WithAllocator(mem), sink.WithRowGroupRows(8))
				if err != nil {
					t.Fatal(err)
				}
				rec := arrowtest.IDs(mem, int(start), n)
				for off := int64(0); off < int64(n); off += 8 { // IPC: batches of 8 rows too
					s := rec.NewSlice(off, min(off+8, int64(n)))
					if err := w.Write(s); err != nil {
						t.Fatal(err)
					}
					s.Release()
				}
				rec.Release()
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			for _, shard := range []fileset.Shard{{Index: 0, Count: 1}, {Index: 1, Count: 3}} {
				var o fileset.Origins
				ds, err := fileset.Read([]string{filepath.Join(dir, "*."+ext)}, fileset.WithAllocator(mem), fileset.WithReadRows(5),
					fileset.WithShard(shard), fileset.WithOrigins(&o))
				if err != nil {
					t.Fatal(err)
				}
				row := int64(0)
				for rec, err := range ds.Records() {
					if err != nil {
						t.Fatal(err)
					}
					for _, id := range arrowtest.Int64s(t, "id", rec) {
						got, ok := o.Locate(row)
						file := filepath.Join(dir, fmt.Sprintf("f%d.%s", id/1000, ext))
						if !ok || got.Path != file || got.Row >= 0 && got.Row != id-starts[file] || got.Row < 0 && got.Unit == "" {
							t.Fatalf("shard %v: row %d (id %d) located at %+v", shard, row, id, got)
						}
						row++
					}
				}
				if _, ok := o.Locate(row); ok {
					t.Fatalf("row %d is past the end and was located", row)
				}
			}
		})
	}
}

// Files of two formats in one list are refused by name, before any is
// opened as the other.
func TestFilesMixedFormats(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	writeFile(t, mem, filepath.Join(dir, "a.parquet"), 0, 10, 5)
	if err := os.WriteFile(filepath.Join(dir, "b.csv"), []byte("id\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := fileset.Read([]string{filepath.Join(dir, "*")})
	if !errors.Is(err, fileset.ErrFormat) || !strings.Contains(err.Error(), "b.csv is csv") {
		t.Fatalf("mixed formats: %v", err)
	}
}

// Files that differ only in nullability read as one dataset; any other
// difference names the first differing field and both files, on one line.
func TestFilesSchemaDifferences(t *testing.T) {
	mem := arrowtest.Allocator(t)
	dir := t.TempDir()
	write := func(name string, schema *arrow.Schema, start int) {
		t.Helper()
		rec := arrowtest.IDs(mem, start, 5)
		defer rec.Release()
		relabelled := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		defer relabelled.Release()
		w, err := sink.Create(filepath.Join(dir, name), schema, sink.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(relabelled); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write("a.parquet", arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), 0)
	write("b.parquet", arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), 5)
	ds, err := fileset.Read([]string{filepath.Join(dir, "*.parquet")}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, ds); !slices.Equal(got, arrowtest.Seq(10)) || !ds.Schema().Field(0).Nullable {
		t.Fatalf("ids %v, schema %s", got, ds.Schema())
	}
	write("c.parquet", arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.PrimitiveTypes.Int64}}, nil), 10)
	_, err = fileset.Read([]string{filepath.Join(dir, "*.parquet")}, fileset.WithAllocator(mem))
	if !errors.Is(err, dataset.ErrSchemaMismatch) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), `a.parquet and `) || !strings.Contains(err.Error(), `c.parquet: field 0 is "id" against "key"`) {
		t.Fatalf("a renamed field: %v", err)
	}
}
