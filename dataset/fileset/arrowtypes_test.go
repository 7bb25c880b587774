package fileset_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// unionValue returns row i of a union column as text: the int32 or
// string its child holds there, or "null".
func unionValue(u array.Union, i int) string {
	child := u.Field(u.ChildID(i))
	at := i
	if d, ok := u.(*array.DenseUnion); ok {
		at = int(d.ValueOffset(i))
	}
	if isNull(child, at) {
		return "null"
	}
	return child.ValueStr(at)
}

// isNull reports a null value; every value of a null-typed array is one
// (arrow-go's Null.IsNull says false, having no bitmap to read).
func isNull(a arrow.Array, i int) bool { return a.DataType().ID() == arrow.NULL || a.IsNull(i) }

// Arrow IPC files from Arrow JS whose columns are null-typed, sparse and
// dense unions (type codes 0/1 and others, a null-typed child), and a
// struct with a null-typed child — the types of the Arrow integration
// suite's generated_null and generated_union files, after an empty record
// as theirs have — read whole and in batches of 7 rows across records,
// every value as written; a dense union whose offset points past its
// child is refused, naming the record batch and column.
func TestArrowJSTypes(t *testing.T) {
	dir := filepath.Join("testdata", "arrowtypes", "files")
	files, err := filepath.Glob(filepath.Join(dir, "*.arrow*"))
	if err != nil || len(files) < 16 {
		t.Fatalf("%d files (%v): run npm ci && node generate.mjs in testdata/arrowtypes", len(files), err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
			if strings.HasPrefix(name, "damaged-") {
				if err == nil {
					_, err = ds.Count()
				}
				if err == nil || !strings.Contains(err.Error(), `record batch 0, column "u"`) || !strings.Contains(err.Error(), "offset") {
					t.Fatalf("a damaged union: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			row := 0
			for rec, err := range ds.Batches(mem, 7) {
				if err != nil {
					t.Fatalf("row %d: %v", row, err)
				}
				ids := rec.Column(0).(*array.Int64)
				for i := range int(rec.NumRows()) {
					if rec.Schema().Field(rec.Schema().NumFields()-1).Name == "is_padding" && rec.Column(int(rec.NumCols())-1).(*array.Boolean).Value(i) {
						continue
					}
					if ids.Value(i) != int64(row) {
						t.Fatalf("row %d holds id %d", row, ids.Value(i))
					}
					checkArrowJSRow(t, name, rec.Column(1), i, row)
					row++
				}
			}
			if row != 2000 {
				t.Fatalf("%d rows read, want 2000", row)
			}
		})
	}
}

func checkArrowJSRow(t *testing.T, name string, col arrow.Array, i, row int) {
	t.Helper()
	var got, want string
	switch c := col.(type) {
	case *array.Null:
		got, want = fmt.Sprint(isNull(c, i)), "true"
	case *array.Struct:
		got, want = fmt.Sprintf("%s %v", c.Field(0).ValueStr(i), isNull(c.Field(1), i)), fmt.Sprintf("%d true", 2*row)
	case array.Union:
		got = unionValue(c, i)
		switch {
		case row%3 == 0:
			want = fmt.Sprint(row)
		case strings.Contains(name, "null-child"):
			want = "null"
		default:
			want = fmt.Sprintf("s%d", row)
		}
	default:
		t.Fatalf("column of type %s", col.DataType())
	}
	if got != want {
		t.Fatalf("row %d: %s, want %s", row, got, want)
	}
}
