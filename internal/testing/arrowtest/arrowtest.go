// Package arrowtest holds helpers for tests that build Arrow records.
package arrowtest

import (
	"os"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Allocator returns a checked allocator that fails t if any bytes are still
// held when the test (and its cleanups registered later) has finished.
func Allocator(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// IDSchema is the schema of [IDs]: one non-nullable int64 column "id".
var IDSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

// IDs returns a record of IDSchema holding start, start+1, …, start+n-1.
func IDs(mem memory.Allocator, start, n int) arrow.RecordBatch {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for i := range n {
		b.Append(int64(start + i))
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(IDSchema, []arrow.Array{col}, int64(n))
}

// FloatID returns a one-row record whose "id" column is float64: a schema
// that differs from IDSchema, for schema-change tests.
func FloatID(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewFloat64Builder(mem)
	defer b.Release()
	b.Append(1)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Float64}}, nil), []arrow.Array{col}, 1)
}

// Chunked returns records of IDSchema with the given sizes, numbered on
// from 0 across them. The caller releases each.
func Chunked(mem memory.Allocator, sizes []int) []arrow.RecordBatch {
	recs := make([]arrow.RecordBatch, len(sizes))
	start := 0
	for i, n := range sizes {
		recs[i] = IDs(mem, start, n)
		start += n
	}
	return recs
}

// Release releases every record.
func Release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// Int64s returns the values of column name of every record, concatenated.
func Int64s(t testing.TB, name string, recs ...arrow.RecordBatch) []int64 {
	t.Helper()
	var out []int64
	for _, r := range recs {
		idx := r.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("no column %q in %s", name, r.Schema())
		}
		out = append(out, r.Column(idx[0]).(*array.Int64).Int64Values()...)
	}
	return out
}

// IntList returns row i of a list<int32> or list<int64> column as
// int64s.
func IntList(t testing.TB, rec arrow.RecordBatch, name string, i int) []int64 {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %s", name, rec.Schema())
	}
	l := rec.Column(idx[0]).(array.ListLike)
	s, e := l.ValueOffsets(i)
	out := []int64{}
	for k := s; k < e; k++ {
		switch v := l.ListValues().(type) {
		case *array.Int32:
			out = append(out, int64(v.Value(int(k))))
		case *array.Int64:
			out = append(out, v.Value(int(k)))
		default:
			t.Fatalf("column %q holds %s, not integers", name, v.DataType())
		}
	}
	return out
}

// ReportPerBatch reports rows/s, ns/batch and allocs/batch for a benchmark
// whose every op ran batches batches over rows rows. Call it after the
// loop; startAllocs is the runtime's Mallocs count before the loop.
func ReportPerBatch(b *testing.B, rows, batches int, startAllocs uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ops := float64(b.N)
	b.ReportMetric(float64(rows)*ops/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(batches)*ops), "ns/batch")
	b.ReportMetric(float64(ms.Mallocs-startAllocs)/(float64(batches)*ops), "allocs/batch")
}

// Mallocs returns the runtime's count of heap allocations so far.
func Mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// Seq returns 0, 1, …, n-1: the ids of n rows made by [IDs] from 0.
func Seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// ReadFile returns a file's bytes, failing the test if it cannot be read:
// two files that are both missing must not compare equal.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
