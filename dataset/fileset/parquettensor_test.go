package fileset_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// tensorFile describes a Parquet file of id, name and a float32 tensor
// column "features" of k values a row, as other writers make them: rows
// that break the shape are placed by row number (-1: none).
type tensorFile struct {
	rows, groupRows, k int
	list               bool // list<float32> instead of fixed_size_list<float32>[k]
	noStoredSchema     bool // no Arrow schema in the footer: a fixed list reads back as list
	required           bool // neither the list nor its values nullable
	props              []parquet.WriterProperty
	nullRow, emptyRow  int
	nullValue, ragged  int
	sizes              map[int]int // a list's rows of other lengths than k
}

func regularFile(rows, groupRows, k int) tensorFile {
	return tensorFile{rows: rows, groupRows: groupRows, k: k, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1}
}

func (tf tensorFile) write(t *testing.T, path string) {
	t.Helper()
	elem := arrow.Field{Name: "element", Type: arrow.PrimitiveTypes.Float32, Nullable: !tf.required}
	var typ arrow.DataType = arrow.FixedSizeListOfField(int32(tf.k), elem)
	if tf.list {
		typ = arrow.ListOfField(elem)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "features", Type: typ, Nullable: !tf.required},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithMaxRowGroupLength(int64(tf.groupRows))}, tf.props...)...)
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	if tf.noStoredSchema {
		aprops = pqarrow.NewArrowWriterProperties()
	}
	fw, err := pqarrow.NewFileWriter(schema, f, props, aprops)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	for start := 0; start < tf.rows; start += tf.groupRows {
		b := array.NewRecordBuilder(mem, schema)
		for i := start; i < min(start+tf.groupRows, tf.rows); i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
			n := tf.k
			switch i {
			case tf.nullRow:
				b.Field(2).AppendNull()
				continue
			case tf.emptyRow:
				n = 0
			case tf.ragged:
				n = tf.k + 1
			}
			if size, ok := tf.sizes[i]; ok {
				n = size
			}
			var vals *array.Float32Builder
			if tf.list {
				lb := b.Field(2).(*array.ListBuilder)
				lb.Append(true)
				vals = lb.ValueBuilder().(*array.Float32Builder)
			} else {
				lb := b.Field(2).(*array.FixedSizeListBuilder)
				lb.Append(true)
				vals = lb.ValueBuilder().(*array.Float32Builder)
			}
			for j := range n {
				if i == tf.nullValue && j == 1 {
					vals.AppendNull()
					continue
				}
				vals.Append(float32(i) + float32(j)/100)
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
}

// readColumns reads path through fileset.Read and returns each column
// whole, and the error that ended the read.
func readColumns(t *testing.T, mem memory.Allocator, path string, opts ...fileset.Option) (cols []arrow.Array, rows int64, err error) {
	t.Helper()
	ds, err := fileset.Read([]string{path}, append(opts, fileset.WithAllocator(mem))...)
	if err != nil {
		return nil, 0, err
	}
	parts := make([][]arrow.Array, ds.Schema().NumFields())
	defer func() {
		for _, p := range parts {
			for _, a := range p {
				a.Release()
			}
		}
	}()
	for rec, rerr := range ds.Records() {
		if rerr != nil {
			err = rerr
			break
		}
		rows += rec.NumRows()
		for i, c := range rec.Columns() {
			c.Retain()
			parts[i] = append(parts[i], c)
		}
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		whole, cerr := array.Concatenate(p, mem)
		if cerr != nil {
			t.Fatal(cerr)
		}
		cols = append(cols, whole)
	}
	return cols, rows, err
}

// The tensor path reads what pqarrow reads: the same rows and values, the
// same types, the same errors, whatever the encoding, and wherever a row
// that breaks the shape lies (pqarrow takes over from its row group).
func TestTensorPathMatchesPqarrow(t *testing.T) {
	with := func(tf tensorFile, edit func(*tensorFile)) tensorFile { edit(&tf); return tf }
	base := regularFile(1000, 100, 8)
	files := map[string]tensorFile{
		"fixed":              base,
		"fixed required":     with(base, func(tf *tensorFile) { tf.required = true }),
		"fixed read as list": with(base, func(tf *tensorFile) { tf.noStoredSchema = true }),
		"list":               with(base, func(tf *tensorFile) { tf.list = true }),
		"one row group":      with(base, func(tf *tensorFile) { tf.groupRows = 1000 }),
		"one-row groups":     with(regularFile(7, 1, 3), func(tf *tensorFile) { tf.list = true }),
		"k 1":                regularFile(300, 64, 1),
		"dictionary":         with(base, func(tf *tensorFile) { tf.props = []parquet.WriterProperty{parquet.WithDictionaryDefault(true)} }),
		"small pages, v2, zstd": with(base, func(tf *tensorFile) {
			tf.props = []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(false)}
		}),
		"byte stream split": with(base, func(tf *tensorFile) {
			tf.props = []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("features.list.element", parquet.Encodings.ByteStreamSplit)}
		}),
		// Pages of a few rows each: a chunk read page by page without its
		// levels expanded, until the page with a null value, from which
		// the column reader reads on.
		"small pages, v1, null value mid-group": with(base, func(tf *tensorFile) {
			tf.nullValue, tf.props = 333, []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithDictionaryDefault(false)}
		}),
		"small pages, v2, null value mid-group": with(base, func(tf *tensorFile) {
			tf.nullValue, tf.props = 333, []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryDefault(false)}
		}),
		"k 64, small pages, required": with(regularFile(1000, 100, 64), func(tf *tensorFile) {
			tf.required, tf.props = true, []parquet.WriterProperty{parquet.WithDataPageSize(2048), parquet.WithDictionaryDefault(false)}
		}),
		// Version 1 pages may end inside a row. Here a row of 15 values
		// is cut 8 | 7, and the chunk's levels divide by its rows (1,032
		// over 129): the first page looks like 128 rows of 8.
		"v1 page ends inside a list row": {rows: 129, groupRows: 129, k: 8, list: true, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1,
			sizes: map[int]int{127: 15, 128: 1}, props: []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithDictionaryDefault(false)}},
		"v1 pages end inside fixed rows": with(regularFile(1000, 300, 10), func(tf *tensorFile) {
			tf.props = []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithBatchSize(64), parquet.WithDictionaryDefault(false)}
		}),
		"v1 pages end inside list rows": with(regularFile(1000, 300, 10), func(tf *tensorFile) {
			tf.list, tf.props = true, []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithBatchSize(64), parquet.WithDictionaryDefault(false)}
		}),
		"v2 pages, rows of 10": with(regularFile(1000, 300, 10), func(tf *tensorFile) {
			tf.list, tf.props = true, []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithBatchSize(64), parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryDefault(false)}
		}),
		"k 10, uncompressed": with(regularFile(1000, 100, 10), func(tf *tensorFile) {
			tf.props = []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryDefault(false)}
		}),
		// pqarrow writes no null fixed_size_list row: null rows are in lists.
		"null row in group 7":   with(base, func(tf *tensorFile) { tf.nullRow, tf.list = 750, true }),
		"null first row":        with(base, func(tf *tensorFile) { tf.nullRow, tf.list = 0, true }),
		"null value":            with(base, func(tf *tensorFile) { tf.nullValue = 333 }),
		"empty last row":        with(base, func(tf *tensorFile) { tf.emptyRow, tf.list = 999, true }),
		"ragged row in group 4": with(base, func(tf *tensorFile) { tf.ragged, tf.list = 420, true }),
		"ragged first row":      with(base, func(tf *tensorFile) { tf.ragged, tf.list = 0, true }),
	}
	readings := map[string][]fileset.Option{
		"all columns":         nil,
		"features only":       {fileset.WithColumns("features")},
		"features, id":        {fileset.WithColumns("features", "id")},
		"shard 1/3, 37 rows":  {fileset.WithShard(fileset.Shard{Index: 1, Count: 3}), fileset.WithReadRows(37)},
		"reads across groups": {fileset.WithReadRows(150)},
		"128 rows a read":     {fileset.WithReadRows(128)},
		"129 rows a read":     {fileset.WithReadRows(129)},
	}
	for name, tf := range files {
		path := filepath.Join(t.TempDir(), "in.parquet")
		tf.write(t, path)
		for reading, opts := range readings {
			t.Run(name+"/"+reading, func(t *testing.T) {
				mem := arrowtest.Allocator(t)
				var wantFrom, gotFrom fileset.Origins
				want, wantRows, wantErr := readColumns(t, mem, path, append(opts, fileset.WithPqarrowOnly(), fileset.WithOrigins(&wantFrom))...)
				defer releaseAll(want)
				got, gotRows, gotErr := readColumns(t, mem, path, append(opts, fileset.WithOrigins(&gotFrom))...)
				defer releaseAll(got)
				for r := range wantRows {
					w, wok := wantFrom.Locate(r)
					g, gok := gotFrom.Locate(r)
					if w != g || wok != gok {
						t.Fatalf("row %d comes from %+v (%t), pqarrow's from %+v (%t)", r, g, gok, w, wok)
					}
				}
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("error %v, pqarrow's %v", gotErr, wantErr)
				}
				if gotRows != wantRows || len(got) != len(want) {
					t.Fatalf("%d rows in %d columns, pqarrow's %d in %d", gotRows, len(got), wantRows, len(want))
				}
				for i := range want {
					if !arrow.TypeEqual(got[i].DataType(), want[i].DataType()) {
						t.Fatalf("column %d: %s, pqarrow's %s", i, got[i].DataType(), want[i].DataType())
					}
					if !array.Equal(got[i], want[i]) {
						t.Fatalf("column %d differs from pqarrow's", i)
					}
				}
			})
		}
	}
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		a.Release()
	}
}

// The tensor decoder reads every float list column itself, whatever its
// rows hold: nothing of it goes through pqarrow's list assembly.
func TestTensorPathCoverage(t *testing.T) {
	base := regularFile(1000, 100, 8)
	with := func(edit func(*tensorFile)) tensorFile { tf := base; edit(&tf); return tf }
	cases := map[string]tensorFile{
		"fixed":             base,
		"list":              with(func(tf *tensorFile) { tf.list = true }),
		"null row at 750":   with(func(tf *tensorFile) { tf.list, tf.nullRow = true, 750 }),
		"ragged row at 420": with(func(tf *tensorFile) { tf.list, tf.ragged = true, 420 }),
		"empty row at 0":    with(func(tf *tensorFile) { tf.list, tf.emptyRow = true, 0 }),
		"null value at 333": with(func(tf *tensorFile) { tf.nullValue = 333 }),
	}
	for name, tf := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.parquet")
			tf.write(t, path)
			names, err := fileset.TensorPathColumns(path, fileset.WithAllocator(arrowtest.Allocator(t)))
			if err != nil || fmt.Sprint(names) != "[features]" {
				t.Fatalf("the tensor decoder reads %v (%v), want [features]", names, err)
			}
		})
	}
}

// A float list column's pages whose levels are those of rows of one width
// are read without expanding them, to the values pqarrow reads: every page of a regular file (a
// fixed_size_list's, or a list's whose rows are alike); in a file
// with a null value, the pages before its page, then the column reader
// from that page on (with its rows before skipped); in a file of another
// encoding, none.
func TestTensorPagesUniform(t *testing.T) {
	noDict := []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithDictionaryDefault(false)}
	for _, c := range []struct {
		name               string
		tf                 tensorFile
		uniform, fallBacks bool
	}{
		{"regular", tensorFile{rows: 1000, groupRows: 100, k: 8, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1, props: noDict}, true, false},
		{"null value", tensorFile{rows: 1000, groupRows: 100, k: 8, nullRow: -1, emptyRow: -1, nullValue: 333, ragged: -1, props: noDict}, true, true},
		{"list", tensorFile{rows: 1000, groupRows: 100, k: 8, list: true, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1, props: noDict}, true, false},
		// Its group's levels do not divide by its rows: read as before.
		{"list, a ragged row", tensorFile{rows: 1000, groupRows: 100, k: 8, list: true, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: 420, props: noDict}, true, false},
		// A row cut by the end of a version 1 page: the page's rows before
		// it, then the column reader from it on.
		{"list, a page ends inside a row", tensorFile{rows: 1000, groupRows: 1000, k: 8, list: true, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1,
			sizes: map[int]int{127: 15, 128: 1}, props: noDict}, true, true},
		{"byte stream split", tensorFile{rows: 1000, groupRows: 100, k: 8, nullRow: -1, emptyRow: -1, nullValue: -1, ragged: -1,
			props: []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("features.list.element", parquet.Encodings.ByteStreamSplit)}}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.parquet")
			c.tf.write(t, path)
			var counts fileset.PageCounts
			mem := arrowtest.Allocator(t)
			cols, rows, err := readColumns(t, mem, path, fileset.WithPageCounts(&counts), fileset.WithReadRows(37))
			defer releaseAll(cols)
			if err != nil || rows != 1000 {
				t.Fatalf("%d rows, %v", rows, err)
			}
			want, _, err := readColumns(t, mem, path, fileset.WithPqarrowOnly(), fileset.WithReadRows(37))
			defer releaseAll(want)
			if err != nil || len(want) != len(cols) {
				t.Fatalf("pqarrow: %d columns, %v", len(want), err)
			}
			for i := range want {
				if !array.Equal(cols[i], want[i]) {
					t.Fatalf("column %d differs from pqarrow's", i)
				}
			}
			if got := counts.Uniform() > 0; got != c.uniform {
				t.Errorf("%d pages read uniform, want some: %t", counts.Uniform(), c.uniform)
			}
			if got := counts.FallBacks() > 0; got != c.fallBacks {
				t.Errorf("%d chunks fell back, want some: %t", counts.FallBacks(), c.fallBacks)
			}
			if c.fallBacks && c.uniform && counts.FallBacks() != 1 {
				t.Errorf("%d chunks fell back, want the one with the null value", counts.FallBacks())
			}
		})
	}
}

// Empty row groups, first, between and last (other writers make them; the
// sink makes one for a file of no rows), read as no rows: every chunk of
// them checked to hold no level.
func TestTensorPathEmptyRowGroups(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
	}, nil)
	for _, layout := range [][]int{{0}, {0, 100, 0, 100, 0}, {100, 0}} {
		t.Run(fmt.Sprint(layout), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.parquet")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			fw, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil {
				t.Fatal(err)
			}
			mem := memory.NewGoAllocator()
			for g, rows := range layout {
				b := array.NewRecordBuilder(mem, schema)
				for i := range rows {
					b.Field(0).(*array.Int64Builder).Append(int64(g*1000 + i))
					l := b.Field(1).(*array.FixedSizeListBuilder)
					l.Append(true)
					for j := range 4 {
						l.ValueBuilder().(*array.Float32Builder).Append(float32(i*4 + j))
					}
				}
				rec := b.NewRecordBatch()
				b.Release()
				if err := fw.NewRowGroupChecked(); err != nil {
					t.Fatal(err)
				}
				for _, col := range rec.Columns() {
					if err := fw.WriteColumnData(col); err != nil {
						t.Fatal(err)
					}
				}
				rec.Release()
			}
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			check := arrowtest.Allocator(t)
			want, wantRows, wantErr := readColumns(t, check, path, fileset.WithPqarrowOnly())
			defer releaseAll(want)
			got, gotRows, gotErr := readColumns(t, check, path)
			defer releaseAll(got)
			total := 0
			for _, n := range layout {
				total += n
			}
			if gotErr != nil || wantErr != nil || gotRows != int64(total) || wantRows != gotRows {
				t.Fatalf("%d rows (%v), pqarrow's %d (%v), want %d", gotRows, gotErr, wantRows, wantErr, total)
			}
			for i := range want {
				if !array.Equal(got[i], want[i]) {
					t.Fatalf("column %d differs from pqarrow's", i)
				}
			}
		})
	}
}
