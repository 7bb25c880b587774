package dataset

import (
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/tensor"
)

// AsTensor returns a dataset whose column name is a
// fixed_size_list<float32>[width]. A list<float32> or large_list<float32>
// column (as Parquet returns a fixed-size list written without the Arrow
// schema) is converted zero-copy: its values are already row-major. A row
// of another length is an error naming its row number in the dataset; a
// null row or value, likewise.
func AsTensor(ds *Dataset, name string, width int) (*Dataset, error) {
	in := ds.Schema()
	idx := in.FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: feature column %q (the dataset has %s)", ErrColumn, name, FieldNames(in))
	}
	col := idx[0]
	got, err := tensor.Width(in.Field(col).Type)
	if err != nil {
		return nil, fmt.Errorf("dataset: feature column %q: %w", name, err)
	}
	if got == width {
		return checkedTensor(ds, name, col, width), nil
	}
	if got != 0 {
		return nil, fmt.Errorf("dataset: feature column %q: %w: %d values per row, want %d", name, tensor.ErrWidth, got, width)
	}
	fields := in.Fields()
	fields[col] = arrow.Field{Name: name, Type: tensor.Type(width), Metadata: fields[col].Metadata}
	md := in.Metadata()
	out := arrow.NewSchema(fields, &md)
	return New(out, func(yield func(arrow.RecordBatch, error) bool) {
		row := int64(0)
		for rec, err := range ds.Records() {
			if err != nil {
				yield(nil, err)
				return
			}
			list, err := listAsFixed(rec.Column(col), width)
			if err != nil {
				yield(nil, rowError(name, row, err))
				return
			}
			cols := append([]arrow.Array(nil), rec.Columns()...)
			cols[col] = list
			converted := array.NewRecordBatch(out, cols, rec.NumRows())
			list.Release()
			if !yieldOwned(yield, converted) {
				return
			}
			row += rec.NumRows()
		}
	}), nil
}

// checkedTensor passes on the records of ds, whose column col is a
// fixed_size_list of width, checking that a model can read each row: a
// null row or value is an error naming its dataset row.
func checkedTensor(ds *Dataset, name string, col, width int) *Dataset {
	return Map(ds, ds.Schema(), func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		_, err := tensor.Float32(rec.Column(col), width)
		if err := rowErrorIf(name, first, err); err != nil {
			return nil, err
		}
		return rec, nil
	})
}

// listAsFixed views a list<float32> array of rows of width values as a
// fixed_size_list<float32>[width], sharing its values.
func listAsFixed(arr arrow.Array, width int) (arrow.Array, error) {
	if _, err := tensor.Float32(arr, width); err != nil { // checks widths and nulls
		return nil, err
	}
	list := arr.(array.ListLike)
	start := 0
	if arr.Len() > 0 {
		b, _ := list.ValueOffsets(0)
		start = int(b)
	}
	values := array.NewSliceData(list.ListValues().Data(), int64(start), int64(start+arr.Len()*width))
	defer values.Release()
	data := array.NewData(tensor.Type(width), arr.Len(),
		[]*memory.Buffer{nil}, []arrow.ArrayData{values}, 0, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// Skip returns a dataset without its first n rows, for resuming a job. It
// reads the skipped rows (only the record that straddles n is sliced).
func Skip(ds *Dataset, n int64) *Dataset {
	if n <= 0 {
		return ds
	}
	return New(ds.Schema(), func(yield func(arrow.RecordBatch, error) bool) {
		left := n
		for rec, err := range ds.Records() {
			if err != nil {
				yield(nil, err)
				return
			}
			rows := rec.NumRows()
			switch {
			case left >= rows:
				left -= rows
			case left > 0:
				if !yieldOwned(yield, rec.NewSlice(left, rows)) {
					return
				}
				left = 0
			default:
				if !yield(rec, nil) {
					return
				}
			}
		}
	})
}

// Take returns a dataset of the first n rows of ds; it stops reading ds
// there (only the record that straddles n is sliced).
func Take(ds *Dataset, n int64) *Dataset {
	return New(ds.Schema(), func(yield func(arrow.RecordBatch, error) bool) {
		left := n
		if left <= 0 {
			return
		}
		for rec, err := range ds.Records() {
			if err != nil {
				yield(nil, err)
				return
			}
			rows := rec.NumRows()
			if rows >= left {
				if rows > left {
					yieldOwned(yield, rec.NewSlice(0, left))
				} else {
					yield(rec, nil)
				}
				return
			}
			if !yield(rec, nil) {
				return
			}
			left -= rows
		}
	})
}

// Writer is what Copy writes to: a sink.Writer, an ipc.Writer, a
// pqarrow.FileWriter (arrow-go's arrio.Writer).
type Writer interface {
	Write(arrow.RecordBatch) error
}

// Copy writes every record of records (such as ds.Records() or
// ds.Batches(mem, n)) to w, in order, and returns the rows written; the
// first error, of either side, ends it.
func Copy(w Writer, records iter.Seq2[arrow.RecordBatch, error]) (int64, error) {
	var n int64
	for rec, err := range records {
		if err == nil {
			err = w.Write(rec)
		}
		if err != nil {
			return n, err
		}
		n += rec.NumRows()
	}
	return n, nil
}
