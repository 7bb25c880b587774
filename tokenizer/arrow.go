package tokenizer

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
)

// CheckTextType reports whether a column type holds text the tokenizer
// reads: string, large_string, string_view, or a dictionary of strings
// (as Parquet files often hold them).
func CheckTextType(dt arrow.DataType) error {
	switch t := dt.(type) {
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return nil
	case *arrow.DictionaryType:
		return CheckTextType(t.ValueType)
	}
	return fmt.Errorf("tokenizer: column type %s holds no text (string, large_string, string_view or a dictionary of them)", dt)
}

// text returns row i of a text column.
func text(col arrow.Array, i int) string {
	switch c := col.(type) {
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.StringView:
		return c.Value(i)
	case *array.Dictionary:
		return text(c.Dictionary(), c.GetValueIndex(i))
	}
	return ""
}

// Tokens returns ds with a column named out (list<int32>: token ids,
// after the columns of ds) made by encoding the text column of each
// row, for a sequence model (package seq). A null text is a
// device.RowError naming the row and the column.
func Tokens(ds *dataset.Dataset, tok *Tokenizer, textColumn, out string, mem memory.Allocator) (*dataset.Dataset, error) {
	in := ds.Schema()
	idx := in.FieldIndices(textColumn)
	if len(idx) != 1 {
		return nil, fmt.Errorf("tokenizer: no column %q (the input has %s)", textColumn, dataset.FieldNames(in))
	}
	if err := CheckTextType(in.Field(idx[0]).Type); err != nil {
		return nil, fmt.Errorf("column %q: %w", textColumn, err)
	}
	if len(in.FieldIndices(out)) > 0 {
		return nil, fmt.Errorf("tokenizer: the input has a column %q already, which the token ids would be", out)
	}
	schema := arrow.NewSchema(append(in.Fields(), arrow.Field{Name: out, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}), nil)
	col := idx[0]
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return dataset.Map(ds, schema, func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		texts := rec.Column(col)
		b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
		defer b.Release()
		vals := b.ValueBuilder().(*array.Int32Builder)
		for i := range int(rec.NumRows()) {
			if texts.IsNull(i) {
				return nil, &device.RowError{Row: first + int64(i), Column: textColumn, Err: fmt.Errorf("null text")}
			}
			e := tok.Encode(text(texts, i))
			b.Append(true)
			for _, id := range e.IDs {
				vals.Append(int32(id))
			}
		}
		ids := b.NewArray()
		defer ids.Release()
		return array.NewRecordBatch(schema, append(slices.Clone(rec.Columns()), ids), rec.NumRows()), nil
	}), nil
}
