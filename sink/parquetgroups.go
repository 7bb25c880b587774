package sink

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// A Parquet file's row groups: gathered as records, cut where the rows
// say, written whole.

// DefaultRowGroupBytes is the most a row group's records hold in Arrow
// buffers unless WithRowGroupBytes says otherwise: the sink holds a whole
// group before it writes it, so this bounds what a file being written
// holds. Rows of lists (token ids, variable-length embeddings) count by
// their values, not as one value each.
const DefaultRowGroupBytes = 64 << 20

// groupCut returns how many of rec's rows from off, at most limit, the
// group being gathered takes: all of them, or the fewest that bring it to
// groupBytes (at least one).
func (w *Writer) groupCut(rec arrow.RecordBatch, off, limit int64) int64 {
	need := 8*w.groupBytes - w.groupBits
	if recordBits(rec, off, off+limit) < need {
		return limit
	}
	lo, hi := int64(1), limit
	for lo < hi {
		mid := lo + (hi-lo)/2
		if recordBits(rec, off, off+mid) >= need {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// spanOf is the bytes rows [a, b) take between offsets (the array's
// own, one past its last row included).
func spanOf[T int32 | int64](offsets []T, a, b int64) T { return offsets[b] - offsets[a] }

// recordBits is the bits rows [a, b) of rec hold in Arrow buffers.
func recordBits(rec arrow.RecordBatch, a, b int64) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += rowBits(c, a, b)
	}
	return n
}

// rowBits is the bits rows [a, b) of arr hold in its values and offsets
// (validity bitmaps aside): a sum over rows, so that a group's size is
// the same however its rows arrive in records.
func rowBits(arr arrow.Array, a, b int64) int64 {
	rows := b - a
	if rows <= 0 {
		return 0 // an empty list array may have no offsets to read
	}
	switch v := arr.(type) {
	case *array.FixedSizeList:
		k := int64(v.DataType().(*arrow.FixedSizeListType).Len())
		off := int64(v.Offset())
		return rowBits(v.ListValues(), (off+a)*k, (off+b)*k)
	case array.ListLike:
		start, _ := v.ValueOffsets(int(a))
		_, end := v.ValueOffsets(int(b - 1))
		return 32*rows + rowBits(v.ListValues(), start, end)
	case *array.String:
		return 32*rows + 8*int64(spanOf(v.ValueOffsets(), a, b))
	case *array.Binary:
		return 32*rows + 8*int64(spanOf(v.ValueOffsets(), a, b))
	case *array.LargeString:
		return 64*rows + 8*spanOf(v.ValueOffsets(), a, b)
	case *array.LargeBinary:
		return 64*rows + 8*spanOf(v.ValueOffsets(), a, b)
	case *array.Struct:
		var n int64
		for i := range v.NumField() {
			n += rowBits(v.Field(i), a, b)
		}
		return n
	case *array.Dictionary:
		return rowBits(v.Indices(), a, b)
	}
	if fw, ok := arr.DataType().(arrow.FixedWidthDataType); ok {
		return int64(fw.BitWidth()) * rows
	}
	return 128 * rows // views and the rest: their headers, at least
}

// writeParquet writes rec into row groups of groupLimit rows, or fewer
// where their Arrow buffers reach groupBytes first (rowBits), so the
// groups depend on the rows alone, not on how they arrive in records. It
// gathers a group's records (shared, not copied) and encodes the group
// whole (splicer). It cuts rec at the groups' boundaries itself, and
// hands the encoder no
// fixed_size_list at an offset: arrow-go's Parquet writer (v18.8.0) writes
// such a slice's values from its parent's first row, so every row group
// after the first would repeat the first's tensors.
func (w *Writer) writeParquet(rec arrow.RecordBatch) error {
	n := rec.NumRows()
	if n == 0 {
		if w.empty == nil && !w.wroteGroup && len(w.group) == 0 {
			// Written at the commit if no row comes: the file then has an
			// empty row group.
			rec.Retain()
			w.empty = rec
		}
		return nil
	}
	for off := int64(0); off < n; {
		k := w.groupCut(rec, off, min(n-off, w.groupLimit-w.inGroup))
		part := rec
		if off > 0 || k < n {
			part = rec.NewSlice(off, off+k)
		} else {
			part.Retain()
		}
		part, err := atZeroOffset(w.mem, part)
		if err != nil {
			return err
		}
		w.group = append(w.group, part)
		w.inGroup += k
		w.groupBits += recordBits(rec, off, off+k)
		off += k
		if w.inGroup == w.groupLimit || w.groupBits >= 8*w.groupBytes {
			if err := w.flushGroup(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushGroup writes the gathered rows as a row group.
func (w *Writer) flushGroup() error {
	group, rows := w.group, w.inGroup
	w.group, w.inGroup, w.groupBits = nil, 0, 0
	if len(group) == 0 {
		return nil
	}
	w.wroteGroup = true
	return w.spliced.encode(w.out, group, rows)
}

// writeGroup writes the rows of group, records of one schema, as a row
// group of pq.
func writeGroup(pq *pqarrow.FileWriter, group []arrow.RecordBatch, rows int64) error {
	if err := pq.NewRowGroupChecked(); err != nil {
		return err
	}
	cols := make([]arrow.Array, len(group))
	for i, f := range group[0].Schema().Fields() {
		for j, r := range group {
			cols[j] = r.Column(i)
		}
		chunked := arrow.NewChunked(f.Type, cols)
		err := pq.WriteColumnChunked(chunked, 0, rows)
		chunked.Release()
		if err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

// finishParquet writes the last, short row group, or the empty one of a
// file that got an empty record and no row.
func (w *Writer) finishParquet() error {
	if w.pq == nil {
		return nil
	}
	if err := w.flushGroup(); err != nil {
		return err
	}
	if w.empty != nil && !w.wroteGroup {
		w.empty.Retain()
		if err := w.spliced.encode(w.out, []arrow.RecordBatch{w.empty}, 0); err != nil {
			return err
		}
	}
	return w.spliced.finish(w.out, w.pq)
}

// releaseParquet releases the records a Parquet writer holds.
func (w *Writer) releaseParquet() {
	if w.spliced != nil {
		w.spliced.wait()
	}
	releaseAll(w.group)
	w.group, w.inGroup, w.groupBits = nil, 0, 0
	if w.empty != nil {
		w.empty.Release()
		w.empty = nil
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// atZeroOffset returns rec, which it takes, with every column that holds
// a fixed_size_list at an offset copied to one at offset 0.
func atZeroOffset(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if !slices.ContainsFunc(rec.Columns(), fixedListAtOffset) {
		return rec, nil
	}
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range rec.Columns() {
		if !fixedListAtOffset(c) {
			c.Retain()
			cols[i] = c
			continue
		}
		copied, err := array.Concatenate([]arrow.Array{c}, mem)
		if err != nil {
			return nil, fmt.Errorf("sink: column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = copied
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}

// fixedListAtOffset reports whether arr is, or holds, a fixed_size_list
// whose data starts at an offset.
func fixedListAtOffset(arr arrow.Array) bool {
	return dataFixedListAtOffset(arr.Data(), false)
}

func dataFixedListAtOffset(d arrow.ArrayData, parentOffset bool) bool {
	at := parentOffset || d.Offset() != 0
	if _, ok := d.DataType().(*arrow.FixedSizeListType); ok && at {
		return true
	}
	for _, child := range d.Children() {
		if dataFixedListAtOffset(child, at) {
			return true
		}
	}
	return false
}

// parquetGroupValues is about the most leaf values a Parquet row group
// holds: 16,384 rows of 64-float tensors, about 4 MiB before compression,
// gathered in memory (as Arrow records) until the group is full. (Arrow
// v15's level encoder was quadratic in the group size and forced groups
// of 256 such rows; v18's is linear.)
const parquetGroupValues = 1 << 20

// rowGroupRows returns the rows per row group for schema s.
func rowGroupRows(s *arrow.Schema) int64 {
	values := 0
	for _, f := range s.Fields() {
		values += leafValues(f.Type)
	}
	return int64(min(max(parquetGroupValues/max(values, 1), 1024), 1<<20))
}

// leafValues returns the values one row of type dt holds (lists count 1).
func leafValues(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		return int(t.Len()) * leafValues(t.Elem())
	case *arrow.StructType:
		n := 0
		for _, f := range t.Fields() {
			n += leafValues(f.Type)
		}
		return n
	}
	return 1
}

// parquetProps returns the writer properties opts make, with statistics
// off for the floating-point values of lists (tensors, embeddings): no
// reader prunes on the minimum of a vector's elements, and keeping them
// was a tenth of writing a float tensor column.
func parquetProps(s *arrow.Schema, arrowProps pqarrow.ArrowWriterProperties, opts ...parquet.WriterProperty) (*parquet.WriterProperties, error) {
	pq, err := pqarrow.ToParquet(s, parquet.NewWriterProperties(opts...), arrowProps)
	if err != nil {
		return nil, err
	}
	for i := range pq.NumColumns() {
		col := pq.Column(i)
		if col.MaxRepetitionLevel() > 0 && (col.PhysicalType() == parquet.Types.Float || col.PhysicalType() == parquet.Types.Double) {
			opts = append(opts, parquet.WithStatsFor(col.Path(), false))
		}
	}
	return parquet.NewWriterProperties(opts...), nil
}
