package fileset_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
)

// Row groups decoded side by side give the rows one decoder gives, in
// order, whatever the rows (null, empty, ragged, null values) and wherever
// the group and read boundaries fall; a consumer that stops early leaves
// nothing held and no goroutine running (TestMain's goleak).
func TestParallelDecodingIsSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 20 {
		rows := make([][]float32, 1+rng.IntN(300))
		nullValue := make([]int, len(rows))
		for i := range rows {
			nullValue[i] = -1
			switch rng.IntN(10) {
			case 0: // a null row
				continue
			case 1:
				rows[i] = []float32{} // empty
			default:
				rows[i] = make([]float32, 1+rng.IntN(5))
				for j := range rows[i] {
					rows[i][j] = float32(i) + float32(j)/8
				}
				if rng.IntN(8) == 0 {
					nullValue[i] = rng.IntN(len(rows[i]))
				}
			}
		}
		path := filepath.Join(t.TempDir(), "in.parquet")
		writeListRows(t, path, rows, nullValue, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(1+rng.IntN(40))), parquet.WithDataPageSize(64)))
		readRows := fileset.WithReadRows(1 + rng.IntN(50))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		one, n1, err1 := readColumns(t, mem, path, readRows, fileset.WithDecoders(1))
		two, n2, err2 := readColumns(t, mem, path, readRows, fileset.WithDecoders(2), fileset.WithParallelRows(1))
		if err1 != nil || err2 != nil || n1 != int64(len(rows)) || n2 != n1 || !array.Equal(one[0], two[0]) {
			t.Fatalf("trial %d: one decoder %d rows (%v), two %d rows (%v), or they differ", trial, n1, err1, n2, err2)
		}
		releaseAll(one)
		releaseAll(two)

		// A consumer that takes a few rows and stops.
		ds, err := fileset.Read([]string{path}, readRows, fileset.WithDecoders(2), fileset.WithParallelRows(1), fileset.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := dataset.Take(ds, int64(len(rows)/3)).Count(); err != nil || n != int64(len(rows)/3) {
			t.Fatalf("trial %d: took %d rows, %v", trial, n, err)
		}
		mem.AssertSize(t, 0)
	}
}
