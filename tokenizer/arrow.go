package tokenizer

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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
	// Pieces is list<string>: each token's text as the model has it
	// (Ġworld, ##ing, <0xE6>); Decoded is the ids decoded back to text
	// by the tokenizer's decoder.
	Pieces, Decoded string
}

// row is what a column is appended from: a row's encoding, and its
// decoded text if asked for.
type row struct {
	e       Encoding
	decoded string
}

// column is one column Encodings adds: its field and how a row of it is
// appended.
type column struct {
	field  arrow.Field
	append func(b array.Builder, r row)
}

func (c Columns) columns() []column {
	ints := func(get func(Encoding) []int64) func(array.Builder, row) {
		return func(lb array.Builder, r row) {
			b, e := lb.(*array.ListBuilder), r.e
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
			func(lb array.Builder, r row) {
				b, e := lb.(*array.ListBuilder), r.e
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
	if c.Pieces != "" {
		out = append(out, column{arrow.Field{Name: c.Pieces, Type: arrow.ListOf(arrow.BinaryTypes.String)}, func(lb array.Builder, r row) {
			b := lb.(*array.ListBuilder)
			b.Append(true)
			b.ValueBuilder().(*array.StringBuilder).AppendValues(r.e.Tokens, nil)
		}})
	}
	if c.Decoded != "" {
		out = append(out, column{arrow.Field{Name: c.Decoded, Type: arrow.BinaryTypes.String}, func(b array.Builder, r row) {
			b.(*array.StringBuilder).Append(r.decoded)
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
func Tokens(ds *dataset.Dataset, tok *Tokenizer, textColumn, out string, mem memory.Allocator, opts ...Option) (*dataset.Dataset, error) {
	return Encodings(ds, tok, textColumn, Columns{IDs: out}, mem, opts...)
}

// Option sets how Encodings encodes.
type Option func(*options)

type options struct {
	workers   int
	pair      string // WithPair's column
	maxBytes  int
	rowErrors func(rec arrow.RecordBatch, i int, err error)
	truncated *atomic.Int64
}

// WithTruncatedCount adds to n the rows whose text (or pair) the
// tokenizer's truncation cut: the rows a job reports as truncated, which
// the model then never sees longer than it keeps.
func WithTruncatedCount(n *atomic.Int64) Option { return func(o *options) { o.truncated = n } }

// WithRowErrors hands each row the tokenizer refuses on its own account
// (a null text, a text past WithMaxTextBytes it cannot read from its
// head: a *device.RowError) to fn, with its record and its index there,
// and leaves the row out of the output, where by default the first such
// row ends the stream. A job's set-aside file is such an fn.
func WithRowErrors(fn func(rec arrow.RecordBatch, i int, err error)) Option {
	return func(o *options) { o.rowErrors = fn }
}

// DefaultMaxTextBytes bounds the bytes of a row's text (and of its
// pair) Encodings reads: tokenizing holds some tens of bytes for each
// byte read, and a model keeps a few thousand tokens at most. A longer
// text is read from its head where the tokenizer allows
// (Tokenizer.EncodeWithin).
const DefaultMaxTextBytes = 1 << 20

// WithPair encodes each row's text with the same row of another text
// column as its pair (a cross-encoder's query and passage), truncated
// as the tokenizer's truncation says for pairs.
func WithPair(column string) Option { return func(o *options) { o.pair = column } }

// WithMaxTextBytes sets the most bytes of a row's text (and of its
// pair) the tokenizer reads (DefaultMaxTextBytes by default), as
// Tokenizer.EncodeWithin: a row whose truncation needs more read is a
// row error naming the ceiling, ErrTextTooLong.
func WithMaxTextBytes(n int) Option { return func(o *options) { o.maxBytes = n } }

// WithWorkers sets how many goroutines encode a record's rows (the
// default: GOMAXPROCS). The rows keep their order.
func WithWorkers(n int) Option {
	return func(o *options) { o.workers = max(n, 1) }
}

// Encodings returns ds with the columns cols names, after its own, made
// by encoding the text column of each row.
func Encodings(ds *dataset.Dataset, tok *Tokenizer, textColumn string, cols Columns, mem memory.Allocator, opts ...Option) (*dataset.Dataset, error) {
	o := options{workers: runtime.GOMAXPROCS(0), maxBytes: DefaultMaxTextBytes}
	for _, opt := range opts {
		opt(&o)
	}
	in := ds.Schema()
	textIndex := func(name string) (int, error) {
		idx := in.FieldIndices(name)
		if len(idx) != 1 {
			return 0, fmt.Errorf("tokenizer: no column %q (the input has %s)", name, dataset.FieldNames(in))
		}
		if err := CheckTextType(in.Field(idx[0]).Type); err != nil {
			return 0, fmt.Errorf("column %q: %w", name, err)
		}
		return idx[0], nil
	}
	col, err := textIndex(textColumn)
	if err != nil {
		return nil, err
	}
	pairCol := -1
	if o.pair != "" {
		if pairCol, err = textIndex(o.pair); err != nil {
			return nil, err
		}
	}
	added := cols.columns()
	for _, f := range cols.Fields() {
		if len(in.FieldIndices(f.Name)) > 0 {
			return nil, fmt.Errorf("tokenizer: the input has a column %q already, which the encodings would be", f.Name)
		}
	}
	fields := append(in.Fields(), cols.Fields()...)
	schema := arrow.NewSchema(fields, nil)
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return dataset.Map(ds, schema, func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		texts := rec.Column(col)
		builders := make([]array.Builder, len(added))
		for i, c := range added {
			builders[i] = array.NewBuilder(mem, c.field.Type)
			defer builders[i].Release()
		}
		in := rowsIn{texts: texts, column: textColumn, pairColumn: o.pair, first: first, maxBytes: o.maxBytes}
		if pairCol >= 0 {
			in.pairs = rec.Column(pairCol)
		}
		rows, errs := encodeRows(tok, in, o.workers, cols.Decoded != "")
		var refused []int
		for i, err := range errs {
			if err == nil {
				continue
			}
			if o.rowErrors == nil {
				return nil, err
			}
			o.rowErrors(rec, i, err)
			refused = append(refused, i)
		}
		cut := int64(0)
		for i, r := range rows {
			if errs[i] != nil {
				continue
			}
			if r.e.Truncated {
				cut++
			}
			for k, c := range added {
				c.append(builders[k], r)
			}
		}
		if o.truncated != nil {
			o.truncated.Add(cut)
		}
		if len(refused) > 0 {
			kept, err := dataset.WithoutRows(mem, rec, refused)
			if err != nil {
				return nil, err
			}
			defer kept.Release()
			rec = kept
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

// rowsIn are the rows encodeRows encodes: a text column, maybe a pair
// column, the first row's number for errors, the text ceiling.
type rowsIn struct {
	texts, pairs       arrow.Array
	column, pairColumn string
	first              int64
	maxBytes           int
}

// encode encodes row i.
func (in rowsIn) encode(tok *Tokenizer, i int) (Encoding, error) {
	if in.texts.IsNull(i) {
		return Encoding{}, &device.RowError{Row: in.first + int64(i), Column: in.column, Err: fmt.Errorf("null text")}
	}
	s, pair := text(in.texts, i), ""
	if in.pairs != nil {
		if in.pairs.IsNull(i) {
			return Encoding{}, &device.RowError{Row: in.first + int64(i), Column: in.pairColumn, Err: fmt.Errorf("null text")}
		}
		pair = text(in.pairs, i)
	}
	var e Encoding
	var err error
	if in.pairs != nil {
		e, err = tok.EncodePairWithin(s, pair, in.maxBytes)
	} else {
		e, err = tok.EncodeWithin(s, in.maxBytes)
	}
	if errors.Is(err, ErrTextTooLong) {
		err = &device.RowError{Row: in.first + int64(i), Column: in.column, Err: err}
	}
	return e, err
}

// encodeRows encodes rows on workers goroutines, each a run of rows, in
// order, and returns each row's encoding or its error (a
// *device.RowError).
func encodeRows(tok *Tokenizer, in rowsIn, workers int, decode bool) ([]row, []error) {
	n := in.texts.Len()
	rows := make([]row, n)
	errs := make([]error, n)
	workers = min(workers, max(n/16, 1))
	// Runs of 32 rows, taken in turn: texts of any lengths share out.
	const run = 32
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(run)) - run
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+run, n); i++ {
					r := &rows[i]
					if r.e, errs[i] = in.encode(tok, i); errs[i] == nil && decode {
						r.decoded, errs[i] = tok.Decode(r.e.IDs, false)
					}
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if _, ok := err.(*device.RowError); err != nil && !ok {
			errs[i] = &device.RowError{Row: in.first + int64(i), Column: in.column, Err: err}
		}
	}
	return rows, errs
}
