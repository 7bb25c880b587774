package dataset_test

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
)

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
		if batches != want || !slices.Equal(got, arrowtest.Seq(total)) {
			t.Fatalf("%d batches (want %d), ids %v", batches, want, got)
		}
	})
}
