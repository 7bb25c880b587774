package dataset

import "github.com/apache/arrow-go/v18/arrow"

// Map passes each record of ds through fn, with the dataset row its
// first row is (counted over every record of ds, those fn skips too),
// and yields what fn returns in its place, as a dataset of schema: rec
// itself (borrowed, as the loop body borrows it), a record fn made (which
// Map releases after the loop body), or nil to skip rec. An error from
// ds or fn ends the stream with it.
func Map(ds *Dataset, schema *arrow.Schema, fn func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error)) *Dataset {
	return New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		first := int64(0)
		for rec, err := range ds.Records() {
			var out arrow.RecordBatch
			if err == nil {
				out, err = fn(rec, first)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			first += rec.NumRows()
			if out == nil {
				continue
			}
			if out != rec {
				if !yieldOwned(yield, out) {
					return
				}
				continue
			}
			if !yield(rec, nil) {
				return
			}
		}
	})
}
