package fileset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset/fileset"
)

// seedFile adds a good file of the format, some truncations and bit flips
// of it to a fuzz target's corpus.
func seedFile(f *testing.F, name string) {
	good := goodFile(f, f.TempDir(), name, 40)
	f.Add(good)
	for _, cut := range []int{0, 8, len(good) / 3, len(good) / 2, len(good) - 8, len(good) - 1} {
		f.Add(good[:max(cut, 0)])
	}
	for _, at := range []int{4, len(good) / 4, len(good) / 2, len(good) - 12} {
		flipped := append([]byte(nil), good...)
		flipped[at] ^= 0x40
		f.Add(flipped)
	}
}

// fuzzFile reads data as a file of the format ext through fileset.Read:
// an error, or exactly the rows the file declares (Parquet), and never a
// panic or a hang.
func fuzzFile(f *testing.F, ext string) {
	seedFile(f, "seed"+ext)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "in"+ext)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rows, err := readAll(t, path, fileset.WithAllocator(mem), fileset.WithReadRows(7))
		if err != nil {
			// Not checked: Arrow's IPC reader, recovering its own panic on a
			// damaged record batch, keeps the message's buffers (garbage
			// the Go allocator reclaims, but the checked allocator counts).
			return
		}
		mem.AssertSize(t, 0)
		if ext == ".parquet" {
			declared, derr := fileset.Rows([]string{path})
			if derr != nil || declared != rows {
				t.Fatalf("read %d rows without an error; the footer declares %d (%v)", rows, declared, derr)
			}
		}
	})
}

// FuzzParquetTensorPath reads damaged Parquet files with the project's
// float list decoder and with pqarrow alone. Where both read a file whole
// they agree, value for value; where the decoder fails, its error says the
// file is unreadable or lost rows. Where only one of them fails nothing is
// ruled: pqarrow misplaces values on some valid files (see
// docs/upstream/), and the decoder refuses levels pqarrow lets pass.
func FuzzParquetTensorPath(f *testing.F) {
	seedFile(f, "seed.parquet")
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "in.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewGoAllocator()
		want, wantRows, wantErr := readColumns(t, mem, path, fileset.WithReadRows(7), fileset.WithPqarrowOnly())
		defer releaseAll(want)
		got, gotRows, gotErr := readColumns(t, mem, path, fileset.WithReadRows(7))
		defer releaseAll(got)
		_, openErr := fileset.Read([]string{path})
		if openErr == nil && gotErr != nil && !errors.Is(gotErr, fileset.ErrUnreadable) && !errors.Is(gotErr, fileset.ErrRowCount) {
			t.Fatalf("error %v is neither ErrUnreadable nor ErrRowCount", gotErr)
		}
		if gotErr != nil || wantErr != nil {
			return
		}
		if gotRows != wantRows || len(got) != len(want) {
			t.Fatalf("%d rows in %d columns, pqarrow's %d in %d", gotRows, len(got), wantRows, len(want))
		}
		for i := range want {
			if !array.ApproxEqual(got[i], want[i], array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
				t.Fatalf("column %d differs from pqarrow's", i)
			}
		}
	})
}

// FuzzTensorRowBoundaries writes a list<float32> column whose rows the
// input shapes — each byte a row: 0xff null, else its low 3 bits the
// number of values (0: empty) and bit 3 a null value in it — in row groups,
// pages and reads of sizes the input picks, and reads it back with the
// project's decoder: every row as written, wherever irregular rows fall
// against row group, page and read boundaries. pages picks the writer's
// batch of levels, (pages&31)+1, after which a page may end (inside a
// row, on version 1 pages), bit 5 version 2 pages, bit 6 plain values
// (the pages the decoder reads itself) rather than a dictionary.
func FuzzTensorRowBoundaries(f *testing.F) {
	f.Add([]byte{3, 3, 3, 4, 3, 3, 3, 3}, uint8(4), uint8(3), uint8(0))     // a long row ending a read
	f.Add([]byte{2, 3, 3, 3, 3, 3, 3, 3}, uint8(8), uint8(1), uint8(0))     // a short first row, reads of one
	f.Add([]byte{3, 3, 0xff, 3, 0, 3, 11, 3}, uint8(3), uint8(3), uint8(0)) // null, empty, null value on boundaries
	f.Add([]byte{0, 0, 0, 0xff}, uint8(2), uint8(5), uint8(0))
	// Rows of 4, one of 7 cut 4 | 3 by the end of a version 1 page, one
	// of 1: the group's levels divide by its rows, the first page looks
	// like rows of 4.
	f.Add([]byte{4, 4, 4, 4, 4, 4, 4, 7, 1}, uint8(9), uint8(8), uint8(64+3))
	f.Add([]byte{4, 4, 4, 4, 4, 4, 4, 7, 1, 4, 4, 4}, uint8(12), uint8(9), uint8(64+32+3))
	f.Fuzz(func(t *testing.T, shape []byte, groupRows, readRows, pages uint8) {
		if len(shape) == 0 || len(shape) > 2000 {
			return
		}
		rows := make([][]float32, len(shape))
		nullValue := make([]int, len(shape))
		for i, b := range shape {
			nullValue[i] = -1
			if b == 0xff {
				continue
			}
			rows[i] = make([]float32, b&7)
			for j := range rows[i] {
				rows[i][j] = float32(i*8+j) + 0.5
			}
			if b&8 != 0 && len(rows[i]) > 0 {
				nullValue[i] = len(rows[i]) - 1
			}
		}
		path := filepath.Join(t.TempDir(), "in.parquet")
		props := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(int64(max(groupRows, 1))),
			parquet.WithDataPageSize(64), parquet.WithBatchSize(int64(pages&31) + 1)}
		if pages&32 != 0 {
			props = append(props, parquet.WithDataPageVersion(parquet.DataPageV2))
		}
		if pages&64 != 0 {
			props = append(props, parquet.WithDictionaryDefault(false))
		}
		writeListRows(t, path, rows, nullValue, parquet.NewWriterProperties(props...))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		cols, n, err := readColumns(t, mem, path, fileset.WithReadRows(max(int(readRows), 1)), fileset.WithColumns("v"))
		defer releaseAll(cols)
		if err != nil || n != int64(len(rows)) {
			t.Fatalf("read %d rows of %d: %v", n, len(rows), err)
		}
		v := cols[0].(*array.List)
		values := v.ListValues().(*array.Float32)
		for i, want := range rows {
			if (want == nil) != v.IsNull(i) {
				t.Fatalf("row %d: null %t, written null %t", i, v.IsNull(i), want == nil)
			}
			start, end := v.ValueOffsets(i)
			if want == nil {
				continue
			}
			if int(end-start) != len(want) {
				t.Fatalf("row %d: %d values, written %d", i, end-start, len(want))
			}
			for j := range want {
				at := int(start) + j
				if values.IsNull(at) != (j == nullValue[i]) || (j != nullValue[i] && values.Value(at) != want[j]) {
					t.Fatalf("row %d value %d: %v (null %t), written %v", i, j, values.Value(at), values.IsNull(at), want[j])
				}
			}
		}
	})
}

// writeListRows writes rows (nil: null) as a nullable list<float32>
// column "v", value nullValue[i] of row i null, as props say.
func writeListRows(t *testing.T, path string, rows [][]float32, nullValue []int, props *parquet.WriterProperties) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true}}, nil)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	lb := b.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	for i, r := range rows {
		if r == nil {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		for j, x := range r {
			if j == nullValue[i] {
				vb.AppendNull()
				continue
			}
			vb.Append(x)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
}

func FuzzParquetSource(f *testing.F)   { fuzzFile(f, ".parquet") }
func FuzzIPCFileSource(f *testing.F)   { fuzzFile(f, ".arrow") }
func FuzzIPCStreamSource(f *testing.F) { fuzzFile(f, ".arrows") }
func FuzzCSVSource(f *testing.F)       { fuzzFile(f, ".csv") }
