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

// Columns names the columns Encodings adds; an empty name is not
// added. IDs, Mask and TypeIDs are list<int32>; Offsets is
// list<fixed_size_list<int32>[2]> (characters of the text).
type Columns struct {
	IDs, Mask, TypeIDs, Offsets string
}

// column is one column Encodings adds: its field and how a row of it is
// appended from an encoding.
type column struct {
	field  arrow.Field
	append func(b *array.ListBuilder, e Encoding)
}

func (c Columns) columns() []column {
	ints := func(get func(Encoding) []int64) func(*array.ListBuilder, Encoding) {
		return func(b *array.ListBuilder, e Encoding) {
			b.Append(true)
			vals := b.ValueBuilder().(*array.Int32Builder)
			for _, v := range get(e) {
				vals.Append(int32(v))
			}
		}
	}
	list := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	var out []column
	for _, c := range []struct {
		name string
		get  func(Encoding) []int64
	}{
		{c.IDs, func(e Encoding) []int64 { return e.IDs }},
		{c.Mask, func(e Encoding) []int64 { return e.AttentionMask }},
		{c.TypeIDs, func(e Encoding) []int64 { return e.TypeIDs }},
	} {
		if c.name != "" {
			out = append(out, column{arrow.Field{Name: c.name, Type: list}, ints(c.get)})
		}
	}
	if c.Offsets != "" {
		out = append(out, column{arrow.Field{Name: c.Offsets, Type: arrow.ListOf(arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Int32))},
			func(b *array.ListBuilder, e Encoding) {
				b.Append(true)
				pairs := b.ValueBuilder().(*array.FixedSizeListBuilder)
				vals := pairs.ValueBuilder().(*array.Int32Builder)
				for _, o := range e.Offsets {
					pairs.Append(true)
					vals.Append(int32(o[0]))
					vals.Append(int32(o[1]))
				}
			}})
	}
	return out
}

// Fields returns the fields of the columns cols adds, in order.
func (c Columns) Fields() []arrow.Field {
	var fs []arrow.Field
	for _, col := range c.columns() {
		fs = append(fs, col.field)
	}
	return fs
}

// Tokens returns ds with a column named out (list<int32>: token ids,
// after the columns of ds) made by encoding the text column of each
// row, for a sequence model (package seq). A null text is a
// device.RowError naming the row and the column.
func Tokens(ds *dataset.Dataset, tok *Tokenizer, textColumn, out string, mem memory.Allocator) (*dataset.Dataset, error) {
	return Encodings(ds, tok, textColumn, Columns{IDs: out}, mem)
}

// Encodings returns ds with the columns cols names, after its own, made
// by encoding the text column of each row.
func Encodings(ds *dataset.Dataset, tok *Tokenizer, textColumn string, cols Columns, mem memory.Allocator) (*dataset.Dataset, error) {
	in := ds.Schema()
	idx := in.FieldIndices(textColumn)
	if len(idx) != 1 {
		return nil, fmt.Errorf("tokenizer: no column %q (the input has %s)", textColumn, dataset.FieldNames(in))
	}
	if err := CheckTextType(in.Field(idx[0]).Type); err != nil {
		return nil, fmt.Errorf("column %q: %w", textColumn, err)
	}
	added := cols.columns()
	for _, f := range cols.Fields() {
		if len(in.FieldIndices(f.Name)) > 0 {
			return nil, fmt.Errorf("tokenizer: the input has a column %q already, which the encodings would be", f.Name)
		}
	}
	fields := append(in.Fields(), cols.Fields()...)
	schema := arrow.NewSchema(fields, nil)
	col := idx[0]
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return dataset.Map(ds, schema, func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		texts := rec.Column(col)
		builders := make([]*array.ListBuilder, len(added))
		for i, c := range added {
			builders[i] = array.NewBuilder(mem, c.field.Type).(*array.ListBuilder)
			defer builders[i].Release()
		}
		for i := range int(rec.NumRows()) {
			if texts.IsNull(i) {
				return nil, &device.RowError{Row: first + int64(i), Column: textColumn, Err: fmt.Errorf("null text")}
			}
			e, err := tok.Encode(text(texts, i))
			if err != nil {
				return nil, &device.RowError{Row: first + int64(i), Column: textColumn, Err: err}
			}
			for k, c := range added {
				c.append(builders[k], e)
			}
		}
		out := slices.Clone(rec.Columns())
		for _, b := range builders {
			arr := b.NewArray()
			defer arr.Release()
			out = append(out, arr)
		}
		return array.NewRecordBatch(schema, out, rec.NumRows()), nil
	}), nil
}
