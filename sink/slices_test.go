package sink_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// Every format keeps a tensor slice's own values: records cut from a
// larger one at an offset, as the job's outputs get them.
func TestSlicesKeepTheirValues(t *testing.T) {
	for _, name := range []string{"out.parquet", "out.arrow", "out.arrows"} {
		t.Run(name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			whole := predictions(t, mem, 3000)
			defer whole.Release()
			path := filepath.Join(t.TempDir(), name)
			writeCuts(t, mem, path, whole, [][2]int64{{1000, 1500}, {7, 1000}, {2999, 3000}, {1500, 2999}})
			ids, got := readBack(t, mem, path)
			want, _ := tensor.Float32(whole.Column(1), 3)
			for i, id := range ids {
				src := int(id - 100)
				for j := range 3 {
					if math.Float32bits(got[3*i+j]) != math.Float32bits(want[3*src+j]) {
						t.Fatalf("id %d value %d: %v, want %v", id, j, got[3*i+j], want[3*src+j])
					}
				}
			}
			if len(ids) != 500+993+1+1499 {
				t.Fatalf("%d rows read back", len(ids))
			}
		})
	}
}

// DuckDB, a reader that shares no code with Arrow Go, reads every value a
// Parquet output holds as written, bit for bit: records of a job's batch
// size and slices at offsets, across row group boundaries (where Arrow
// Go's own writer repeated the first rows' tensors).
func TestDuckDBReadsEveryValue(t *testing.T) {
	mem := arrowtest.Allocator(t)
	whole := predictions(t, mem, 3000)
	defer whole.Release()
	path := filepath.Join(t.TempDir(), "out.parquet")
	var cuts [][2]int64
	for off := int64(0); off < 3000; off += 256 {
		cuts = append(cuts, [2]int64{off, min(off+256, 3000)})
	}
	writeCuts(t, mem, path, whole, cuts)
	// As text: JSON has no negative zero.
	rows := duckdbtest.Query(t, "SELECT id, list_transform(probabilities, x -> x::VARCHAR) FROM read_parquet("+duckdb.Quote(path)+") ORDER BY id")
	want, _ := tensor.Float32(whole.Column(1), 3)
	if len(rows) != 3000 {
		t.Fatalf("DuckDB read %d rows, want 3000", len(rows))
	}
	for i, row := range rows {
		if id := row[0].(string); id != fmt.Sprint(100+i) {
			t.Fatalf("row %d: id %s", i, id)
		}
		for j, v := range row[1].([]any) {
			f, err := strconv.ParseFloat(v.(string), 32)
			if err != nil {
				t.Fatal(err)
			}
			if got := math.Float32bits(float32(f)); got != math.Float32bits(want[3*i+j]) {
				t.Fatalf("row %d value %d: DuckDB reads %v, written %v", i, j, f, want[3*i+j])
			}
		}
	}
}

// writeCuts writes the rows [from, to) of whole for each cut, a slice
// each, to path in row groups of 1,000 rows.
func writeCuts(t *testing.T, mem memory.Allocator, path string, whole arrow.RecordBatch, cuts [][2]int64) {
	t.Helper()
	w, err := sink.Create(path, whole.Schema(), sink.WithAllocator(mem), sink.WithRowGroupRows(1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range cuts {
		s := whole.NewSlice(cut[0], cut[1])
		err := w.Write(s)
		s.Release()
		if err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
