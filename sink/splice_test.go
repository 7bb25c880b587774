package sink_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"go.uber.org/goleak"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/sink"
)

// mixedRows builds rows of the columns a job writes: a key, a text with
// nulls, token lists with nulls and empty lists, and a tensor.
func mixedRows(t *testing.T, mem memory.Allocator, rows int) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "embedding", Type: arrow.FixedSizeListOfNonNullable(4, arrow.PrimitiveTypes.Float32)},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 3 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("row ", i*i))
		}
		tokens := b.Field(2).(*array.ListBuilder)
		switch i % 11 {
		case 5:
			tokens.AppendNull()
		case 6:
			tokens.AppendEmptyValue()
		default:
			tokens.Append(true)
			for j := range i % 13 {
				tokens.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
			}
		}
		emb := b.Field(3).(*array.FixedSizeListBuilder)
		emb.Append(true)
		for j := range 4 {
			emb.ValueBuilder().(*array.Float32Builder).Append(float32(i) / float32(j+1))
		}
	}
	return b.NewRecordBatch()
}

// chunkPages returns the bytes of every column chunk's pages in the
// Parquet file at path, row group by row group, and its key-value
// metadata.
func chunkPages(t *testing.T, path string) (pages [][]byte, kv map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() {
				start = min(start, cc.DictionaryPageOffset())
			}
			pages = append(pages, raw[start:start+cc.TotalCompressedSize()])
		}
	}
	kv = map[string]string{}
	for _, k := range md.KeyValueMetadata().Keys() {
		kv[k] = *md.KeyValueMetadata().FindValue(k)
	}
	return pages, kv
}

// A writer with encoders writes the file its caller's goroutine writes:
// the same row groups, each column chunk's pages the same bytes, the same
// footer metadata, every value read back the same by arrow-go and DuckDB.
func TestEncodersWriteTheSameFile(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const rows = 5000
	whole := mixedRows(t, mem, rows)
	defer whole.Release()
	sizes := func(off int) int { return 1 + off*7919%700 }
	one := writeInRecords(t, whole, sizes, sink.WithAllocator(mem), sink.WithRowGroupRows(300))
	wantGroups := rowGroups(t, one)
	wantPages, wantKV := chunkPages(t, one)
	if len(wantGroups) != 17 {
		t.Fatalf("%d row groups, want 17", len(wantGroups))
	}
	for _, n := range []int{1, 2, 3, 32} {
		t.Run(fmt.Sprint(n, " encoders"), func(t *testing.T) {
			path := writeInRecords(t, whole, sizes, sink.WithAllocator(mem), sink.WithRowGroupRows(300), sink.WithEncoders(n))
			if got := rowGroups(t, path); !slices.Equal(got, wantGroups) {
				t.Fatalf("row groups %v, want %v", got, wantGroups)
			}
			pages, kv := chunkPages(t, path)
			if len(pages) != len(wantPages) {
				t.Fatalf("%d column chunks, want %d", len(pages), len(wantPages))
			}
			for i := range pages {
				if !bytes.Equal(pages[i], wantPages[i]) {
					t.Fatalf("row group %d column %d: pages differ", i/4, i%4)
				}
			}
			if len(kv) != len(wantKV) || kv["ARROW:schema"] != wantKV["ARROW:schema"] {
				t.Fatalf("footer metadata %v, want %v", kv, wantKV)
			}
			readsBack(t, mem, path, whole)
			got := duckdbtest.Query(t, "SELECT count(*), sum(id), count(text), sum(len(tokens)), count(tokens), sum(embedding[4]) FROM read_parquet("+duckdb.Quote(path)+")")
			want := duckdbtest.Query(t, "SELECT count(*), sum(id), count(text), sum(len(tokens)), count(tokens), sum(embedding[4]) FROM read_parquet("+duckdb.Quote(one)+")")
			if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(got[0][0]) != fmt.Sprint(rows) {
				t.Fatalf("DuckDB reads %v, and %v from the file encoded by its caller", got, want)
			}
		})
	}
}

// Footer metadata set before the commit, files of no rows, and files of
// an empty record come out as with no encoder.
func TestEncodersFooterAndEmptyFiles(t *testing.T) {
	mem := arrowtest.Allocator(t)
	whole := mixedRows(t, mem, 10)
	defer whole.Release()
	write := func(encoders int, recs ...arrow.RecordBatch) string {
		path := filepath.Join(t.TempDir(), "out.parquet")
		w, err := sink.Create(path, whole.Schema(), sink.WithAllocator(mem), sink.WithEncoders(encoders))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.SetFooter("drainpipe.test", "set aside: 0"); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	empty := whole.NewSlice(0, 0)
	defer empty.Release()
	for name, recs := range map[string][]arrow.RecordBatch{"no record": nil, "an empty record": {empty}, "rows": {empty, whole, empty}} {
		t.Run(name, func(t *testing.T) {
			one, two := write(0, recs...), write(2, recs...)
			if g1, g2 := rowGroups(t, one), rowGroups(t, two); !slices.Equal(g1, g2) {
				t.Fatalf("row groups %v, want %v", g2, g1)
			}
			_, kv := chunkPages(t, two)
			if kv["drainpipe.test"] != "set aside: 0" {
				t.Fatalf("footer metadata %v", kv)
			}
			read := readTable(t, mem, two)
			defer read.Release()
			if n := duckdbtest.Query(t, "SELECT count(*) FROM read_parquet("+duckdb.Quote(two)+")"); fmt.Sprint(n[0][0]) != fmt.Sprint(read.NumRows()) {
				t.Fatalf("DuckDB counts %v rows, arrow-go %d", n[0][0], read.NumRows())
			}
		})
	}
}

// An abort with row groups being encoded waits for them: no goroutine is
// left, no buffer held, no file made.
func TestEncodersAbort(t *testing.T) {
	defer goleak.VerifyNone(t)
	mem := arrowtest.Allocator(t)
	whole := mixedRows(t, mem, 3000)
	path := filepath.Join(t.TempDir(), "out.parquet")
	w, err := sink.Create(path, whole.Schema(), sink.WithAllocator(mem), sink.WithRowGroupRows(100), sink.WithEncoders(4))
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(whole)
	whole.Release()
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after Abort: %v", err)
	}
	if mem.CurrentAlloc() != 0 {
		t.Fatalf("%d bytes held after Abort", mem.CurrentAlloc())
	}
}
