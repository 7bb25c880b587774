package dataset_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// collect ranges over ds in batches of n and returns the batch sizes and
// the ids seen, failing on an error.
func collect(t *testing.T, mem memory.Allocator, ds *dataset.Dataset, n int) (sizes []int, ids []int64) {
	t.Helper()
	for b, err := range ds.Batches(mem, n) {
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, int(b.NumRows()))
		ids = append(ids, arrowtest.Int64s(t, "id", b)...)
	}
	return sizes, ids
}

func TestBatchesRandomChunkings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		n := 1 + rng.IntN(17)
		size := 1 + rng.IntN(n+1) // batch sizes 1..N+1
		chunks := make([]int, rng.IntN(12))
		total := 0
		for i := range chunks {
			chunks[i] = rng.IntN(3*n + 1) // record sizes 0..3N
			total += chunks[i]
		}
		recs := arrowtest.Chunked(mem, chunks)
		ds := dataset.FromRecords(arrowtest.IDSchema, recs...)
		sizes, ids := collect(t, mem, ds, size)
		arrowtest.Release(recs)
		mem.AssertSize(t, 0)

		want := make([]int64, total)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("trial %d: chunks %v, batch %d: rows %v, want 0..%d", trial, chunks, size, ids, total-1)
		}
		for i, s := range sizes {
			last := i == len(sizes)-1
			if (!last && s != size) || s == 0 || s > size {
				t.Fatalf("trial %d: chunks %v, batch %d: sizes %v", trial, chunks, size, sizes)
			}
		}
		if wantBatches := (total + size - 1) / size; len(sizes) != wantBatches {
			t.Fatalf("trial %d: %d batches, want %d", trial, len(sizes), wantBatches)
		}
	}
}

func TestBatchesZeroCopyInsideOneRecord(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := arrowtest.IDs(mem, 0, 10)
	defer rec.Release()
	other := arrowtest.IDs(mem, 10, 3)
	defer other.Release()
	inRec := rec.Column(0).(*array.Int64).Int64Values()
	inOther := other.Column(0).(*array.Int64).Int64Values()
	var shared, copied int
	for b, err := range dataset.FromRecords(arrowtest.IDSchema, rec, other).Batches(mem, 4) {
		if err != nil {
			t.Fatal(err)
		}
		v := b.Column(0).(*array.Int64).Int64Values()
		if (v[0] < 10 && &v[0] == &inRec[v[0]]) || (v[0] >= 10 && &v[0] == &inOther[v[0]-10]) {
			shared++
		} else {
			copied++
		}
	}
	// [0,4), [4,8) lie inside rec and [12,13) inside other; [8,12) spans both.
	if shared != 3 || copied != 1 {
		t.Fatalf("shared %d, copied %d batches; want 3 and 1", shared, copied)
	}
}

// Spans say where each batch lies: in the source record itself, or, for a
// batch that spans records and the last short one, in a record of its own.
func TestSpansPointIntoTheSourceRecords(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := arrowtest.IDs(mem, 0, 10)
	defer rec.Release()
	other := arrowtest.IDs(mem, 10, 3)
	defer other.Release()
	type where struct {
		source       string
		offset, rows int
		ids          []int64
	}
	var got []where
	for s, err := range dataset.FromRecords(arrowtest.IDSchema, rec, other).Spans(mem, 4) {
		if err != nil {
			t.Fatal(err)
		}
		source := "own"
		switch s.Record {
		case rec:
			source = "rec"
		case other:
			source = "other"
		}
		slice := s.Slice()
		got = append(got, where{source, s.Offset, s.Rows, arrowtest.Int64s(t, "id", slice)})
		slice.Release()
	}
	want := []where{
		{"rec", 0, 4, []int64{0, 1, 2, 3}},
		{"rec", 4, 4, []int64{4, 5, 6, 7}},
		{"own", 0, 4, []int64{8, 9, 10, 11}},
		{"own", 0, 1, []int64{12}},
	}
	if len(got) != len(want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.source != w.source || g.offset != w.offset || g.rows != w.rows || !slices.Equal(g.ids, w.ids) {
			t.Fatalf("span %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestBatchesBreakReleases(t *testing.T) {
	mem := arrowtest.Allocator(t)
	recs := arrowtest.Chunked(mem, []int{3, 3, 3, 3})
	defer arrowtest.Release(recs)
	ds := dataset.FromRecords(arrowtest.IDSchema, recs...)
	for range 2 { // re-runnable
		seen := 0
		for _, err := range ds.Batches(mem, 5) {
			if err != nil {
				t.Fatal(err)
			}
			if seen++; seen == 2 {
				break // while a spanning batch holds pending slices
			}
		}
	}
}

func TestBatchSizeInvalid(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ds := dataset.FromRecords(arrowtest.IDSchema)
	for _, n := range []int{0, -3} {
		for _, err := range ds.Batches(mem, n) {
			if !errors.Is(err, dataset.ErrBatchSize) {
				t.Fatalf("batch size %d: err %v, want ErrBatchSize", n, err)
			}
		}
	}
}

func TestSchemaChangeNamesRecord(t *testing.T) {
	mem := arrowtest.Allocator(t)
	good := arrowtest.IDs(mem, 0, 2)
	defer good.Release()
	bad := arrowtest.FloatID(mem)
	defer bad.Release()

	var got error
	for _, err := range dataset.FromRecords(arrowtest.IDSchema, good, good, bad).Batches(mem, 3) {
		got = err
	}
	if !errors.Is(got, dataset.ErrSchemaMismatch) {
		t.Fatalf("err %v, want ErrSchemaMismatch", got)
	}
	if want := "record 2:"; got.Error()[:len(want)] != want {
		t.Fatalf("err %q does not name the record (%q)", got, want)
	}
}

func TestFromReader(t *testing.T) {
	mem := arrowtest.Allocator(t)
	recs := arrowtest.Chunked(mem, []int{4, 0, 7})
	defer arrowtest.Release(recs)
	opened := 0
	ds := dataset.FromReader(arrowtest.IDSchema, func() (array.RecordReader, error) {
		opened++
		return array.NewRecordReader(arrowtest.IDSchema, recs)
	})
	for range 2 {
		if _, ids := collect(t, mem, ds, 5); len(ids) != 11 || ids[10] != 10 {
			t.Fatalf("ids %v", ids)
		}
	}
	if opened != 2 {
		t.Fatalf("opened %d times, want once per range", opened)
	}
	if n, err := ds.Count(); err != nil || n != 11 {
		t.Fatalf("Rows() = %d, %v; want 11", n, err)
	}

	boom := errors.New("no such table")
	failing := dataset.FromReader(arrowtest.IDSchema, func() (array.RecordReader, error) { return nil, boom })
	for _, err := range failing.Records() {
		if !errors.Is(err, boom) {
			t.Fatalf("err %v, want %v", err, boom)
		}
	}
}

func TestUniformTensors(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ds := dataset.UniformTensors(mem, 25, 3, 10, 7)
	var first []float32
	for run := range 2 {
		var vals []float32
		rows := 0
		for b, err := range ds.Batches(mem, 8) {
			if err != nil {
				t.Fatal(err)
			}
			rows += int(b.NumRows())
			fl := b.Column(1).(*array.FixedSizeList)
			v := fl.ListValues().(*array.Float32).Float32Values()
			vals = append(vals, v[fl.Offset()*3:(fl.Offset()+fl.Len())*3]...)
		}
		if rows != 25 || len(vals) != 75 {
			t.Fatalf("rows %d, values %d", rows, len(vals))
		}
		for _, v := range vals {
			if v < -1 || v >= 1 {
				t.Fatalf("value %v outside [-1, 1)", v)
			}
		}
		if run == 1 && !slices.Equal(vals, first) {
			t.Fatal("second range saw different values")
		}
		first = vals
	}
}

func TestBatchesPanicInBodyReleases(t *testing.T) {
	mem := arrowtest.Allocator(t)
	recs := arrowtest.Chunked(mem, []int{8, 3})
	defer arrowtest.Release(recs)
	ds := dataset.FromRecords(arrowtest.IDSchema, recs...)
	for _, at := range []int{0, 2} { // inside one record; spanning two
		func() {
			defer func() {
				if r := recover(); r != "body" {
					t.Fatalf("recovered %v", r)
				}
			}()
			i := 0
			for range ds.Batches(mem, 4) {
				if i == at {
					panic("body")
				}
				i++
			}
		}()
	}
}

func TestTakeSkipAndCopy(t *testing.T) {
	mem := arrowtest.Allocator(t)
	recs := arrowtest.Chunked(mem, []int{3, 0, 4, 5})
	defer arrowtest.Release(recs)
	ds := dataset.FromRecords(arrowtest.IDSchema, recs...)
	for _, c := range []struct {
		skip, take int64
		want       []int64
	}{{0, 0, nil}, {0, 3, arrowtest.Seq(3)}, {2, 5, []int64{2, 3, 4, 5, 6}}, {7, 100, []int64{7, 8, 9, 10, 11}}, {12, 1, nil}} {
		var got []int64
		for rec, err := range dataset.Take(dataset.Skip(ds, c.skip), c.take).Records() {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, arrowtest.Int64s(t, "id", rec)...)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("skip %d take %d: %v, want %v", c.skip, c.take, got, c.want)
		}
	}
	var sum collector
	if n, err := dataset.Copy(&sum, ds.Batches(mem, 5)); err != nil || n != 12 || !slices.Equal(sum.ids, arrowtest.Seq(12)) || sum.writes != 3 {
		t.Fatalf("copy: %d rows, %v, %d writes of %v", n, err, sum.writes, sum.ids)
	}
}

type collector struct {
	ids    []int64
	writes int
}

func (c *collector) Write(rec arrow.RecordBatch) error {
	c.writes++
	for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
		c.ids = append(c.ids, id)
	}
	return nil
}
