package sink_test

import (
	"fmt"
	"math"
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
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/internal/testing/jsparquet"
	"github.com/drainpipe/drainpipe/sink"
)

// tensorValue is value j of row i: bit patterns from all over float32's
// range (subnormals, negative zero, the largest), never a NaN.
func tensorValue(i, j int) float32 {
	v := math.Float32frombits(uint32(i*7919+j) * 2654435761)
	if v != v {
		return float32(i) - float32(j)/8
	}
	return v
}

// tensorRows builds rows of an int64 id and a fixed_size_list "v" of
// width values of elem (float32 or float64), the field nullable or not;
// the rows nulls names are null, and the values nullValues names (row,
// value) too, the elements then nullable.
func tensorRows(t *testing.T, mem memory.Allocator, rows, width int, elem arrow.DataType, nullable bool, nulls map[int]bool, nullValues map[[2]int]bool) arrow.RecordBatch {
	t.Helper()
	listType := arrow.FixedSizeListOfNonNullable(int32(width), elem)
	if len(nullValues) > 0 {
		listType = arrow.FixedSizeListOf(int32(width), elem)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: listType, Nullable: nullable},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	ids, list := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.FixedSizeListBuilder)
	for i := range rows {
		ids.Append(int64(i))
		if nulls[i] {
			list.AppendNull()
			continue
		}
		list.Append(true)
		for j := range width {
			switch vb := list.ValueBuilder().(type) {
			case *array.Float32Builder:
				if nullValues[[2]int{i, j}] {
					vb.AppendNull()
				} else {
					vb.Append(tensorValue(i, j))
				}
			case *array.Float64Builder:
				vb.Append(float64(tensorValue(i, j)) * math.Pi)
			}
		}
	}
	return b.NewRecordBatch()
}

// digestOf is jsparquet's digest of rec's id and float32 "v" columns.
func digestOf(t *testing.T, rec arrow.RecordBatch) jsparquet.Digest {
	t.Helper()
	ids := arrowtest.Int64s(t, "id", rec)
	list := rec.Column(1).(*array.FixedSizeList)
	values := list.ListValues().(*array.Float32)
	width := int(list.DataType().(*arrow.FixedSizeListType).Len())
	lists, null := make([][]float32, len(ids)), make([]bool, len(ids))
	for i := range ids {
		null[i] = list.IsNull(i)
		lists[i] = values.Float32Values()[i*width : (i+1)*width]
	}
	return jsparquet.Sum(ids, lists, null)
}

// referenceFile writes rec with arrow-go's own writer, as the reference
// the sink's file is read against.
func referenceFile(t *testing.T, rec arrow.RecordBatch) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reference.parquet")
	tbl := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer tbl.Release()
	// One row group: arrow-go (v18.8.0) writes a fixed_size_list sliced
	// at an offset from its parent's first row, so each later group would
	// repeat the first's tensors.
	rows := rec.NumRows()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithMaxRowGroupLength(rows))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pqarrow.WriteTable(tbl, f, rows, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		t.Fatal(err)
	}
	return path
}

// readsBackWithDrainpipe checks that the dataset reader, whose Parquet
// path decodes tensor pages itself, reads the file at path back as whole.
func readsBackWithDrainpipe(t *testing.T, mem memory.Allocator, path string, whole arrow.RecordBatch) {
	t.Helper()
	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for r, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		want := whole.NewSlice(off, off+r.NumRows())
		same := array.RecordEqual(r, want)
		want.Release()
		if !same {
			t.Fatalf("rows %d to %d read back otherwise", off, off+r.NumRows())
		}
		off += r.NumRows()
	}
	if off != whole.NumRows() {
		t.Fatalf("%d rows read back, want %d", off, whole.NumRows())
	}
}

// The tensor columns the sink encodes itself read back bit for bit, by
// arrow-go, the dataset reader, DuckDB (against arrow-go's own file of the
// same rows), hyparquet and parquet-wasm: widths whose repetition levels
// are bit-packed (below 16) and runs, floats of both sizes, fields
// nullable and not, pages cut across records and row groups.
func TestTensorChunksReadBack(t *testing.T) {
	mem := arrowtest.Allocator(t)
	for _, width := range []int{1, 3, 10, 16, 384} {
		for _, elem := range []arrow.DataType{arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64} {
			for _, nullable := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d %s nullable=%v", width, elem, nullable), func(t *testing.T) {
					rows := min(5000, 300_000/width)
					whole := tensorRows(t, mem, rows, width, elem, nullable, nil, nil)
					defer whole.Release()
					path := writeInRecords(t, whole, func(off int) int { return 1 + off*7919%700 }, sink.WithAllocator(mem), sink.WithRowGroupRows(int64(rows/3)))
					readsBack(t, mem, path, whole)
					readsBackWithDrainpipe(t, mem, path, whole)
					if elem.ID() != arrow.FLOAT32 || width == 16 {
						return
					}
					ref := referenceFile(t, whole)
					diff := duckdbtest.Query(t, "SELECT count(*), count(r.id) FROM read_parquet("+duckdb.Quote(path)+") o LEFT JOIN read_parquet("+
						duckdb.Quote(ref)+") r ON o.id = r.id AND o.v::VARCHAR = r.v::VARCHAR")
					if fmt.Sprint(diff[0]) != fmt.Sprint([]any{fmt.Sprint(rows), fmt.Sprint(rows)}) {
						t.Fatalf("DuckDB: %v rows, %v of them as arrow-go's file holds them; want %d", diff[0][0], diff[0][1], rows)
					}
					jsparquet.Check(t, path, "id", "v", digestOf(t, whole))
				})
			}
		}
	}
}

// A row group whose tensors hold a null value is encoded by arrow-go, the
// groups around it by the sink: each reads back. (A null row of a
// fixed_size_list, arrow-go's writer refuses.)
func TestTensorChunksBesideNulls(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const rows, group = 4000, 1000
	whole := tensorRows(t, mem, rows, 10, arrow.PrimitiveTypes.Float32, true, nil, map[[2]int]bool{{2999, 3}: true})
	defer whole.Release()
	path := writeInRecords(t, whole, func(off int) int { return 1 + off*7919%700 }, sink.WithAllocator(mem), sink.WithRowGroupRows(group))
	readsBack(t, mem, path, whole)
	readsBackWithDrainpipe(t, mem, path, whole)
	got := duckdbtest.Query(t, "SELECT count(*), count(v), count(*) FILTER (WHERE list_contains(v, NULL) OR len(list_filter(v, x -> x IS NULL)) > 0) FROM read_parquet("+duckdb.Quote(path)+")")
	if fmt.Sprint(got[0]) != fmt.Sprint([]any{"4000", "4000", "1"}) {
		t.Fatalf("DuckDB counts rows, non-null rows, rows with a null value: %v", got[0])
	}
}

// Any width, rows, row group and record sizes: the tensors read back as
// written (arrow-go's reader), and the row groups are as asked.
func FuzzTensorChunks(f *testing.F) {
	f.Add(uint16(10), uint16(1000), uint16(300), uint16(77), false)
	f.Add(uint16(384), uint16(90), uint16(41), uint16(43), true)
	f.Add(uint16(1), uint16(9000), uint16(8191), uint16(1), false)
	f.Add(uint16(17), uint16(1), uint16(1), uint16(1), true)
	f.Fuzz(func(t *testing.T, width, rows, group, record uint16, wide bool) {
		w, n := 1+int(width)%1200, 1+int(rows)%5000
		if w*n > 1_500_000 {
			n = 1_500_000 / w
		}
		elem := arrow.DataType(arrow.PrimitiveTypes.Float32)
		if wide {
			elem = arrow.PrimitiveTypes.Float64
		}
		mem := arrowtest.Allocator(t)
		whole := tensorRows(t, mem, n, w, elem, wide, nil, nil)
		defer whole.Release()
		path := writeInRecords(t, whole, func(off int) int { return 1 + (off+int(record))%(1+int(record)) }, sink.WithAllocator(mem), sink.WithRowGroupRows(1+int64(group)))
		readsBack(t, mem, path, whole)
		groups := rowGroups(t, path)
		if sum(groups) != int64(n) || int64(len(groups)) != (int64(n)+int64(group))/(1+int64(group)) {
			t.Fatalf("row groups %v of %d rows, %d a group", groups, n, 1+int(group))
		}
	})
}
