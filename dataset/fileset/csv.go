package fileset

import (
	encsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/storage"
)

// ErrCSVValue reports a CSV value that does not parse as its column's type.
var ErrCSVValue = errors.New("CSV value does not parse")

// CSV files are read by Arrow's reader with every column as a string, then
// converted here, column by column, to the inferred (or given) types: so a
// value that does not parse is reported with its row and column, which
// Arrow's typed reader cannot do, and the types come from a sample of rows,
// not from the first chunk only.

type csvReader struct {
	f      storage.File
	rr     *csv.Reader
	header []string
	out    *arrow.Schema // the types, projected
	cols   []int         // for each field of out, its column in the file
	mem    memory.Allocator
	chunk  int
	path   string
	onBad  func(path string, fileRow int64, column string, err error)
}

func (c *filesConfig) openCSV(path string, mem memory.Allocator) (fileReader, error) {
	f, err := c.opener.Open(c.ctx, path)
	if err != nil {
		return nil, err
	}
	r := &csvReader{f: f, mem: mem, chunk: c.batchRows, path: path, onBad: c.csvBadValues}
	if err := r.init(c); err != nil {
		f.Close()
		return nil, err
	}
	r.rr = csv.NewReader(f, stringSchema(r.header), csv.WithHeader(true), csv.WithChunk(c.batchRows),
		csv.WithAllocator(mem), csv.WithNullReader(true, ""))
	return r, nil
}

// csvLine is the line, from 1, of a CSV file's row, from 0 after the
// header: rows read one line each (a quoted value spanning lines moves
// every later row down).
func csvLine(row int64) int64 { return row + 2 }

// stringSchema is the schema of columns of strings of the names given.
func stringSchema(names []string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for i, name := range names {
		fields[i] = arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// init reads the header and a sample of rows, settles the types and
// rewinds the file.
func (r *csvReader) init(c *filesConfig) error {
	sample := encsv.NewReader(r.f)
	sample.ReuseRecord = true
	header, err := sample.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("CSV file is empty: no header")
		}
		return fmt.Errorf("CSV header: %w", err)
	}
	r.header = append([]string(nil), header...)
	var all []arrow.Field
	if c.csvSchema != nil {
		for _, name := range r.header {
			idx := c.csvSchema.FieldIndices(name)
			if len(idx) != 1 {
				return fmt.Errorf("%w: CSV column %q is not in the given schema %s", dataset.ErrColumn, name, dataset.FieldNames(c.csvSchema))
			}
			all = append(all, c.csvSchema.Field(idx[0]))
		}
	} else {
		kinds := make([]csvKind, len(r.header))
		rows := 0
		for ; rows < max(c.csvSample, 1); rows++ {
			rec, err := sample.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("row %d: %w", rows, err)
			}
			for i, v := range rec {
				if i < len(kinds) {
					kinds[i] = kinds[i].widen(v)
				}
			}
		}
		if rows == 0 {
			return errors.New("CSV has a header and no rows: no types to infer (give a schema)")
		}
		numbers, err := dataset.MatchColumns(stringSchema(r.header), c.csvNumbers...)
		if err != nil {
			return err
		}
		for i, k := range kinds {
			if k != kindInt && k != kindFloat && slices.Contains(numbers, r.header[i]) {
				k = kindFloat
			}
			all = append(all, arrow.Field{Name: r.header[i], Type: k.dataType(), Nullable: true})
		}
	}
	for _, f := range all {
		if _, err := newConverter(f.Type); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	full := arrow.NewSchema(all, nil)
	if r.out, err = projected(full, c.columns); err != nil {
		return err
	}
	for _, f := range r.out.Fields() {
		r.cols = append(r.cols, full.FieldIndices(f.Name)[0])
	}
	_, err = r.f.Seek(0, io.SeekStart)
	return err
}

func (r *csvReader) schema() *arrow.Schema { return r.out }

func (r *csvReader) declared(func(int) bool) int64 { return -1 }

func (r *csvReader) close() {
	if r.rr != nil {
		r.rr.Release()
	}
	r.f.Close()
}

func (r *csvReader) records(mine func(int) bool) iter.Seq2[piece, error] {
	return func(yield func(piece, error) bool) {
		for i := 0; r.rr.Next(); i++ {
			if !mine(i) {
				continue
			}
			first := int64(i) * int64(r.chunk)
			rec, err := r.convert(r.rr.RecordBatch(), first)
			if err != nil {
				yield(piece{}, err)
				return
			}
			ok := yield(piece{rec, []run{{n: rec.NumRows(), fileRow: first, text: true}}}, nil)
			rec.Release()
			if !ok {
				return
			}
		}
		if err := r.rr.Err(); err != nil {
			yield(piece{}, fmt.Errorf("CSV: %w", err))
			return
		}
	}
}

// convert turns a chunk of strings into the typed columns of out; first is
// the file row (from 0, after the header) of the chunk's first row.
func (r *csvReader) convert(strs arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(r.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for j, col := range r.cols {
		f := r.out.Field(j)
		conv, _ := newConverter(f.Type)
		var onBad func(int, error)
		if r.onBad != nil {
			onBad = func(row int, err error) { r.onBad(r.path, first+int64(row), f.Name, err) }
		}
		arr, row, err := conv(r.mem, strs.Column(col).(*array.String), onBad)
		if err == nil && !f.Nullable && arr.NullN() > 0 {
			for row = 0; arr.IsValid(row); row++ {
			}
			err = errors.New("empty, and the column is not nullable")
			arr.Release()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: line %d, column %q: %w", ErrCSVValue, csvLine(first+int64(row)), f.Name, err)
		}
		cols[j] = arr
	}
	out := array.NewRecordBatch(r.out, cols, strs.NumRows())
	return out, nil
}

// csvKind is what a column's sampled values allow, narrowest first.
type csvKind int

const (
	kindNone csvKind = iota // only empty values so far
	kindBool
	kindInt
	kindFloat
	kindString
)

// widen returns the narrowest kind that holds k's values and v.
func (k csvKind) widen(v string) csvKind {
	if v == "" {
		return k // a null fits any kind
	}
	switch l := strings.ToLower(v); {
	case k <= kindBool && (l == "true" || l == "false"):
		return kindBool
	case k == kindBool:
		return kindString // booleans and numbers do not mix
	case k <= kindInt && isInt(v):
		return kindInt
	case k <= kindFloat && isFloat(v):
		return kindFloat
	}
	return kindString
}

func isInt(v string) bool {
	_, err := strconv.ParseInt(v, 10, 64)
	return err == nil
}

func isFloat(v string) bool {
	_, err := strconv.ParseFloat(v, 64)
	return err == nil
}

func (k csvKind) dataType() arrow.DataType {
	switch k {
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindInt:
		return arrow.PrimitiveTypes.Int64
	case kindFloat:
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.BinaryTypes.String
}

// converter builds a typed column from strings (nulls stay null); on a
// value that does not parse it returns the row.
// With onBad set, a value that does not parse becomes a null and is
// reported to onBad instead.
type converter func(mem memory.Allocator, s *array.String, onBad func(row int, err error)) (arrow.Array, int, error)

func newConverter(dt arrow.DataType) (converter, error) {
	switch dt.ID() {
	case arrow.STRING:
		return func(_ memory.Allocator, s *array.String, _ func(int, error)) (arrow.Array, int, error) {
			s.Retain()
			return s, 0, nil
		}, nil
	case arrow.BOOL:
		return parsed(dt, func(b array.Builder, v string) error {
			x, err := strconv.ParseBool(strings.ToLower(v))
			if err == nil {
				b.(*array.BooleanBuilder).Append(x)
			}
			return err
		}), nil
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		bits := dt.(arrow.FixedWidthDataType).BitWidth()
		return parsed(dt, func(b array.Builder, v string) error {
			x, err := strconv.ParseInt(v, 10, bits)
			if err == nil {
				appendInt(b, x)
			}
			return err
		}), nil
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		bits := dt.(arrow.FixedWidthDataType).BitWidth()
		return parsed(dt, func(b array.Builder, v string) error {
			x, err := strconv.ParseUint(v, 10, bits)
			if err == nil {
				appendUint(b, x)
			}
			return err
		}), nil
	case arrow.FLOAT32:
		return parsed(dt, func(b array.Builder, v string) error {
			x, err := strconv.ParseFloat(v, 32)
			if err == nil {
				b.(*array.Float32Builder).Append(float32(x))
			}
			return err
		}), nil
	case arrow.FLOAT64:
		return parsed(dt, func(b array.Builder, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err == nil {
				b.(*array.Float64Builder).Append(x)
			}
			return err
		}), nil
	}
	return nil, fmt.Errorf("CSV columns of type %s are not supported (strings, booleans, integers, floats are)", dt)
}

// parsed returns a converter that appends each value with add.
func parsed(dt arrow.DataType, add func(array.Builder, string) error) converter {
	return func(mem memory.Allocator, s *array.String, onBad func(int, error)) (arrow.Array, int, error) {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		b.Reserve(s.Len())
		for i := range s.Len() {
			if s.IsNull(i) {
				b.AppendNull()
				continue
			}
			if err := add(b, s.Value(i)); err != nil {
				var num *strconv.NumError
				if errors.As(err, &num) {
					err = fmt.Errorf("%q is not %s (%v)", s.Value(i), article(dt), num.Err)
				}
				if onBad != nil {
					b.AppendNull()
					onBad(i, err)
					continue
				}
				return nil, i, err
			}
		}
		return b.NewArray(), 0, nil
	}
}

func article(dt arrow.DataType) string {
	name := dt.String()
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}

func appendInt(b array.Builder, x int64) {
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(int8(x))
	case *array.Int16Builder:
		b.Append(int16(x))
	case *array.Int32Builder:
		b.Append(int32(x))
	case *array.Int64Builder:
		b.Append(x)
	}
}

func appendUint(b array.Builder, x uint64) {
	switch b := b.(type) {
	case *array.Uint8Builder:
		b.Append(uint8(x))
	case *array.Uint16Builder:
		b.Append(uint16(x))
	case *array.Uint32Builder:
		b.Append(uint32(x))
	case *array.Uint64Builder:
		b.Append(x)
	}
}
