package dataset_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
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

// fuzzFile reads data as a file of the format ext through dataset.Files:
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
		rows, err := readAll(t, path, dataset.WithAllocator(mem), dataset.WithReadRows(7))
		if err != nil {
			// Not checked: Arrow's IPC reader, recovering its own panic on a
			// damaged record batch, keeps the message's buffers (garbage
			// the Go allocator reclaims, but the checked allocator counts).
			return
		}
		mem.AssertSize(t, 0)
		if ext == ".parquet" {
			declared, derr := dataset.FilesRows([]string{path})
			if derr != nil || declared != rows {
				t.Fatalf("read %d rows without an error; the footer declares %d (%v)", rows, declared, derr)
			}
		}
	})
}

// FuzzParquetTensorPath reads damaged Parquet files with the tensor path
// and with pqarrow alone: the same records, or the same kind of error.
// Before an error the rows yielded agree, but their number may differ:
// pqarrow takes over from the start of a row group, where its reads are
// not cut as they are from the start of the file.
func FuzzParquetTensorPath(f *testing.F) {
	seedFile(f, "seed.parquet")
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "in.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewGoAllocator()
		want, wantRows, wantErr := readColumns(t, mem, path, dataset.WithReadRows(7), dataset.WithPqarrowOnly())
		got, gotRows, gotErr := readColumns(t, mem, path, dataset.WithReadRows(7))
		sameErr := (gotErr == nil) == (wantErr == nil) &&
			errors.Is(gotErr, dataset.ErrUnreadable) == errors.Is(wantErr, dataset.ErrUnreadable) &&
			errors.Is(gotErr, dataset.ErrRowCount) == errors.Is(wantErr, dataset.ErrRowCount)
		if !sameErr || (wantErr == nil && (gotRows != wantRows || len(got) != len(want))) {
			t.Fatalf("%d rows in %d columns (%v), pqarrow's %d in %d (%v)", gotRows, len(got), gotErr, wantRows, len(want), wantErr)
		}
		rows := min(gotRows, wantRows)
		for i := range min(len(got), len(want)) {
			g, w := array.NewSlice(got[i], 0, rows), array.NewSlice(want[i], 0, rows)
			equal := array.ApproxEqual(g, w, array.WithNaNsEqual(true), array.WithAbsTolerance(0))
			g.Release()
			w.Release()
			if !equal {
				t.Fatalf("column %d differs from pqarrow's", i)
			}
		}
	})
}

func FuzzParquetSource(f *testing.F)   { fuzzFile(f, ".parquet") }
func FuzzIPCFileSource(f *testing.F)   { fuzzFile(f, ".arrow") }
func FuzzIPCStreamSource(f *testing.F) { fuzzFile(f, ".arrows") }
func FuzzCSVSource(f *testing.F)       { fuzzFile(f, ".csv") }

// The batcher, pad and strip against a plain reference: records of any
// sizes cut into batches of n rows (the last shorter), each padded to n and
// stripped back, give every id once, in order.
func FuzzBatchPadStrip(f *testing.F) {
	f.Add(byte(4), []byte{3, 0, 9, 1, 4})
	f.Add(byte(1), []byte{0})
	f.Add(byte(63), []byte{100, 200, 7})
	f.Fuzz(func(t *testing.T, size byte, sizes []byte) {
		n := 1 + int(size)%64
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		recSizes := make([]int, min(len(sizes), 50))
		total := 0
		for i := range recSizes {
			recSizes[i] = int(sizes[i]) % 150
			total += recSizes[i]
		}
		recs := arrowtest.Chunked(mem, recSizes)
		defer arrowtest.Release(recs)
		padder, err := pad.New(mem, arrowtest.IDSchema, n)
		if err != nil {
			t.Fatal(err)
		}
		defer padder.Release()
		var got []int64
		batches, want := 0, (total+n-1)/n
		for b, err := range dataset.FromRecords(arrowtest.IDSchema, recs...).Batches(mem, n) {
			if err != nil {
				t.Fatal(err)
			}
			batches++
			rows := int(b.NumRows())
			if rows != n && batches != want {
				t.Fatalf("batch %d of %d has %d rows, want %d", batches, want, rows, n)
			}
			padded, padding, err := padder.Pad(b)
			if err != nil {
				t.Fatal(err)
			}
			flags := padded.Column(int(padded.NumCols()) - 1).(*array.Boolean)
			if padded.NumRows() != int64(n) || padding != n-rows || pad.RealRows(flags) != rows {
				t.Fatalf("batch %d: %d rows padded to %d with %d padding", batches, rows, padded.NumRows(), padding)
			}
			stripped, removed, err := pad.Strip(padded)
			padded.Release()
			if err != nil || removed != padding {
				t.Fatalf("strip: %v, removed %d of %d", err, removed, padding)
			}
			got = append(got, arrowtest.Int64s(t, "id", stripped)...)
			stripped.Release()
		}
		if batches != want || !slices.Equal(got, seq(total)) {
			t.Fatalf("%d batches (want %d), ids %v", batches, want, got)
		}
	})
}
