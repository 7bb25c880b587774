// Package readsum reads a file's float32 feature column through the
// dataset reader and sums every value: the work of the query DuckDB, the
// reader's peer in the benchmarks, runs (sum(list_sum(features))), whose
// result checks the decoding.
package readsum

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
)

// SQL is DuckDB's side of the work, on the file path (an SQL literal).
func SQL(path string) string {
	return "SELECT sum(list_sum(features)) FROM read_parquet(" + path + ")"
}

// Dataset reads the file at path with fileset.Read (readRows a read,
// decoders row groups side by side) and returns its rows and the sum of
// its "features" values.
func Dataset(path string, readRows, decoders int) (int64, float64, error) {
	ds, err := fileset.Read([]string{path}, fileset.WithReadRows(readRows), fileset.WithDecoders(decoders))
	if err != nil {
		return 0, 0, err
	}
	idx := ds.Schema().FieldIndices("features")
	if len(idx) != 1 {
		return 0, 0, fmt.Errorf("%s: no features column", path)
	}
	var n int64
	var sum float64
	for rec, err := range ds.Records() {
		if err != nil {
			return n, 0, err
		}
		n += rec.NumRows()
		col, ok := rec.Column(idx[0]).(array.ListLike)
		if !ok || col.Len() == 0 {
			continue
		}
		start, _ := col.ValueOffsets(0)
		_, end := col.ValueOffsets(col.Len() - 1)
		sum += Float32(col.ListValues().(*array.Float32).Float32Values()[start:end])
	}
	if math.IsNaN(sum) {
		return n, 0, fmt.Errorf("%s: the features sum to NaN", path)
	}
	return n, sum, nil
}

// Float32 sums values in eight independent lanes: one running sum is a
// chain of dependent additions that cost a read a third of its time,
// where DuckDB's SUM runs vectorised.
func Float32(values []float32) float64 {
	var s [8]float64
	i := 0
	for ; i+8 <= len(values); i += 8 {
		v := values[i : i+8 : i+8]
		s[0] += float64(v[0])
		s[1] += float64(v[1])
		s[2] += float64(v[2])
		s[3] += float64(v[3])
		s[4] += float64(v[4])
		s[5] += float64(v[5])
		s[6] += float64(v[6])
		s[7] += float64(v[7])
	}
	for ; i < len(values); i++ {
		s[0] += float64(values[i])
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
}
