package sink_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
)

// tokenRows builds rows like tokenize's output: an id and five token
// lists of 1 to 256 ids, a length a row that the input picks.
func tokenRows(t *testing.T, mem memory.Allocator, rows int) (arrow.RecordBatch, []int) {
	t.Helper()
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for _, name := range []string{"input_ids", "attention_mask", "token_type_ids", "special_tokens_mask", "offsets"} {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true})
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	lens := make([]int, rows)
	for i := range rows {
		lens[i] = 1 + i*7919%256
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		for c := 1; c < len(fields); c++ {
			lb := b.Field(c).(*array.ListBuilder)
			lb.Append(true)
			for j := range lens[i] {
				lb.ValueBuilder().(*array.Int64Builder).Append(int64(i*1000 + j + c))
			}
		}
	}
	return b.NewRecordBatch(), lens
}

// A row group ends at the first row that brings its Arrow buffers to the
// byte ceiling, lists counted by their values (an id's 8 bytes; each
// list's 4-byte offset and 8 bytes an id): computed here row by row, the
// groups are the sink's, however the rows arrive in records, and every
// value reads back. Before, a list counted as one value, and groups of
// token lists held ~200,000 rows.
func TestParquetRowGroupsByBytes(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const rows, ceiling = 20_000, 1 << 20
	whole, lens := tokenRows(t, mem, rows)
	defer whole.Release()
	var want []int64
	var bytes, inGroup int64
	for _, n := range lens {
		bytes += 8 + 5*(4+8*int64(n))
		inGroup++
		if bytes >= ceiling {
			want, bytes, inGroup = append(want, inGroup), 0, 0
		}
	}
	if inGroup > 0 {
		want = append(want, inGroup)
	}
	for name, size := range map[string]func(int) int{
		"one record":          func(int) int { return rows },
		"records of 1..700":   func(off int) int { return 1 + off*7919%700 },
		"records of 256 rows": func(int) int { return 256 },
	} {
		t.Run(name, func(t *testing.T) {
			path := writeInRecords(t, whole, size, sink.WithAllocator(mem), sink.WithRowGroupBytes(ceiling))
			if got := rowGroups(t, path); !slices.Equal(got, want) {
				t.Fatalf("row groups %v, want %v", got, want)
			}
			readsBack(t, mem, path, whole)
		})
	}
	if len(want) < 50 || want[0] > 1000 {
		t.Fatalf("groups %v: want ~1 MiB each, some 300 rows", want[:3])
	}
}

// readsBack checks that pqarrow reads the Parquet file at path back as
// whole, column by column.
func readsBack(t *testing.T, mem memory.Allocator, path string, whole arrow.RecordBatch) {
	t.Helper()
	read := readTable(t, mem, path)
	defer read.Release()
	for c := range int(whole.NumCols()) {
		written := arrow.NewChunked(whole.Column(c).DataType(), []arrow.Array{whole.Column(c)})
		same := array.ChunkedEqual(read.Column(c).Data(), written)
		written.Release()
		if !same {
			t.Fatalf("column %s reads back otherwise", whole.ColumnName(c))
		}
	}
}

// readTable reads a Parquet file whole with pqarrow.
func readTable(t *testing.T, mem memory.Allocator, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tbl, err := pqarrow.ReadTable(t.Context(), f, nil, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// Every column type the sink writes is sized without a panic: strings,
// binaries (and their large forms), structs, booleans,
// at an offset and at the record's end.
func TestParquetRowGroupsByBytesEveryType(t *testing.T) {
	mem := arrowtest.Allocator(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "b", Type: arrow.BinaryTypes.Binary},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64})},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	const rows = 3000
	for i := range rows {
		text := strings.Repeat("x", i%97)
		b.Field(0).(*array.StringBuilder).Append(text)
		b.Field(1).(*array.BinaryBuilder).Append([]byte(text))
		b.Field(2).(*array.LargeStringBuilder).Append(text)
		b.Field(3).(*array.BinaryBuilder).Append([]byte(text))
		b.Field(4).(*array.BooleanBuilder).Append(i%2 == 0)
		sb := b.Field(5).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Float64Builder).Append(float64(i))
	}
	whole := b.NewRecordBatch()
	defer whole.Release()
	path := writeInRecords(t, whole, func(off int) int { return 1 + off*31%113 }, sink.WithAllocator(mem), sink.WithRowGroupBytes(16<<10))
	groups := rowGroups(t, path)
	if sum(groups) != rows || len(groups) < 10 {
		t.Fatalf("row groups %v, want %d rows in groups of ~16 KiB", groups, rows)
	}
}
