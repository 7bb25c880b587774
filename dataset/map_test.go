package dataset_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// Map hands fn each record with its first dataset row (counted over the
// records fn skips too) and yields what fn returns: the record itself, a
// record of fn's own (released after the loop body: the checked
// allocator ends at zero), or nothing; fn's error ends the stream.
func TestMap(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ds := dataset.UniformTensors(mem, 10, 2, 3, 1) // records of 3, 3, 3, 1 rows
	var firsts []int64
	var yielded []int64
	mapped := dataset.Map(ds, ds.Schema(), func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		firsts = append(firsts, first)
		switch first {
		case 3:
			return nil, nil // skipped
		case 6:
			return rec.NewSlice(0, 1), nil // a record of its own: one row
		}
		return rec, nil
	})
	for rec, err := range mapped.Records() {
		if err != nil {
			t.Fatal(err)
		}
		yielded = append(yielded, rec.Column(0).(*array.Int64).Value(0), rec.NumRows())
	}
	if !slices.Equal(firsts, []int64{0, 3, 6, 9}) || !slices.Equal(yielded, []int64{0, 3, 6, 1, 9, 1}) {
		t.Fatalf("first rows %v; yielded (first id, rows) %v", firsts, yielded)
	}
	boom := errors.New("boom")
	failing := dataset.Map(ds, ds.Schema(), func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		if first == 3 {
			return nil, boom
		}
		return rec, nil
	})
	n := 0
	for _, err := range failing.Records() {
		if err != nil {
			if !errors.Is(err, boom) || n != 1 {
				t.Fatalf("after %d records: %v", n, err)
			}
			return
		}
		n++
	}
	t.Fatal("no error")
}
