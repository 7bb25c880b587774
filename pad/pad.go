package pad

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Column is the name of the bool column that marks padding rows.
const Column = device.PaddingColumn

var (
	// ErrColumnExists reports an input that already has a column named [Column].
	ErrColumnExists = errors.New("pad: input already has an " + Column + " column")
	// ErrUnsupportedType reports a column whose type cannot be padded.
	ErrUnsupportedType = errors.New("pad: unsupported column type")
	// ErrTooManyRows reports a record longer than the padded size.
	ErrTooManyRows = errors.New("pad: record longer than the batch size")
	// ErrSchema reports a record whose schema is not the one the Padder was made for.
	ErrSchema = errors.New("pad: schema mismatch")
	// ErrNoColumn reports a record without the [Column] column, or with one of the wrong type.
	ErrNoColumn = errors.New("pad: no valid " + Column + " column")
	// ErrNotTrailing reports padding rows that are not all after the real rows.
	ErrNotTrailing = errors.New("pad: padding rows are not a suffix")
)

// field is the schema field of the padding column.
var field = arrow.Field{Name: Column, Type: arrow.FixedWidthTypes.Boolean, Nullable: false}

// Field returns the schema field of the padding column: non-nullable bool.
func Field() arrow.Field { return field }

// Schema returns s with the padding column appended. It fails if s already
// has a column named [Column] or a column of a type that cannot be padded.
func Schema(s *arrow.Schema) (*arrow.Schema, error) {
	if err := CheckSchema(s); err != nil {
		return nil, err
	}
	md := s.Metadata()
	return arrow.NewSchema(append(s.Fields(), field), &md), nil
}

// CheckSchema reports whether every column of s can be padded and none is
// named [Column].
func CheckSchema(s *arrow.Schema) error {
	for _, f := range s.Fields() {
		if f.Name == Column {
			return ErrColumnExists
		}
		if err := checkType(f.Type); err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

func checkType(dt arrow.DataType) error {
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		return checkType(t.Elem())
	case *arrow.ListType:
		return checkType(t.Elem())
	case *arrow.LargeListType:
		return checkType(t.Elem())
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := checkType(f.Type); err != nil {
				return fmt.Errorf("field %q: %w", f.Name, err)
			}
		}
		return nil
	}
	switch dt.ID() {
	case arrow.BOOL,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY,
		arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION,
		arrow.DECIMAL128, arrow.DECIMAL256:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsupportedType, dt)
}

// Padder pads records of one schema to one size. It keeps an all-false
// padding column for full batches, made at the first, so padding a full
// batch allocates no column data (and a size no batch reaches costs
// nothing). A Padder is safe for concurrent use; Release it when done.
type Padder struct {
	mem    memory.Allocator
	in     *arrow.Schema
	out    *arrow.Schema
	size   int
	mu     sync.Mutex
	allOff *array.Boolean // size × false, shared by every full batch
	seen   atomic.Pointer[arrow.Schema]
}

// New returns a Padder for records of schema s padded to size rows.
func New(mem memory.Allocator, s *arrow.Schema, size int) (*Padder, error) {
	if size <= 0 {
		return nil, fmt.Errorf("pad: size %d, want > 0", size)
	}
	out, err := Schema(s)
	if err != nil {
		return nil, err
	}
	return &Padder{mem: mem, in: s, out: out, size: size}, nil
}

// checkSchema reports whether s is the Padder's input schema. A schema
// found equal is remembered, so the batches of one source compare by
// pointer.
func (p *Padder) checkSchema(s *arrow.Schema) error {
	if s == p.in || s == p.seen.Load() {
		return nil
	}
	if !s.Equal(p.in) {
		return fmt.Errorf("%w: expected %s, got %s", ErrSchema, p.in, s)
	}
	p.seen.Store(s)
	return nil
}

// Schema returns the schema of padded records: the input's plus [Column].
func (p *Padder) Schema() *arrow.Schema { return p.out }

// Size returns the number of rows of every padded record.
func (p *Padder) Size() int { return p.size }

// Release frees the Padder's shared column.
func (p *Padder) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allOff != nil {
		p.allOff.Release()
		p.allOff = nil
	}
}

// Pad returns rec extended to Size rows with the padding column appended,
// and the number of padding rows added. rec is not modified or released.
func (p *Padder) Pad(rec arrow.RecordBatch) (arrow.RecordBatch, int, error) {
	return p.PadTo(rec, p.size)
}

// PadTo is Pad to size rows instead of Size, for callers that pad a short
// batch only up to one of a few allowed sizes. size must not exceed Size.
func (p *Padder) PadTo(rec arrow.RecordBatch, size int) (arrow.RecordBatch, int, error) {
	return p.PadRows(rec, 0, int(rec.NumRows()), size)
}

// PadRows is PadTo of rows [offset, offset+rows) of rec, sliced zero-copy:
// one record made, where slicing first would make two.
func (p *Padder) PadRows(rec arrow.RecordBatch, offset, rows, size int) (arrow.RecordBatch, int, error) {
	if size > p.size || size <= 0 {
		return nil, 0, fmt.Errorf("pad: size %d outside 1..%d", size, p.size)
	}
	if rows > size {
		return nil, 0, fmt.Errorf("%w: %d rows, size %d", ErrTooManyRows, rows, size)
	}
	if offset < 0 || rows < 0 || offset+rows > int(rec.NumRows()) {
		return nil, 0, fmt.Errorf("pad: rows %d..%d outside a record of %d", offset, offset+rows, rec.NumRows())
	}
	if err := p.checkSchema(rec.Schema()); err != nil {
		return nil, 0, err
	}
	var small [8]arrow.Array // most schemas: no allocation for the list
	cols := small[:0]
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, c := range rec.Columns() {
		cols = append(cols, slice(c, offset, rows))
	}
	if rows == size {
		if size == p.size {
			cols = append(cols, p.fullColumn())
		} else {
			cols = append(cols, boolColumn(p.mem, size, size))
		}
		return array.NewRecordBatch(p.out, cols, int64(size)), 0, nil
	}
	for i, c := range cols {
		padded, err := extend(p.mem, c, size-rows)
		if err != nil {
			return nil, 0, fmt.Errorf("pad column %q: %w", p.in.Field(i).Name, err)
		}
		c.Release()
		cols[i] = padded
	}
	cols = append(cols, boolColumn(p.mem, size, rows))
	return array.NewRecordBatch(p.out, cols, int64(size)), size - rows, nil
}

// slice returns rows [offset, offset+rows) of arr, which the caller
// releases: arr itself, retained, when that is all of it.
func slice(arr arrow.Array, offset, rows int) arrow.Array {
	if offset == 0 && rows == arr.Len() {
		arr.Retain()
		return arr
	}
	return array.NewSlice(arr, int64(offset), int64(offset+rows))
}

// extend returns a copy of arr followed by k zero values.
func extend(mem memory.Allocator, arr arrow.Array, k int) (arrow.Array, error) {
	b := array.NewBuilder(mem, arr.DataType())
	defer b.Release()
	b.AppendEmptyValues(k)
	zeros := b.NewArray()
	defer zeros.Release()
	return array.Concatenate([]arrow.Array{arr, zeros}, mem)
}

// fullColumn returns the shared padding column of a full batch, retained.
func (p *Padder) fullColumn() *array.Boolean {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allOff == nil {
		p.allOff = boolColumn(p.mem, p.size, p.size)
	}
	p.allOff.Retain()
	return p.allOff
}

// boolColumn returns a padding column of size rows whose first real rows are false.
func boolColumn(mem memory.Allocator, size, real int) *array.Boolean {
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.Reserve(size)
	for i := range size {
		b.UnsafeAppend(i >= real)
	}
	return b.NewBooleanArray()
}

// Strip returns rec without its padding rows and without the padding column,
// zero-copy, and the number of padding rows removed. Padding rows must all
// come after the real rows, as [Padder.Pad] puts them.
func Strip(rec arrow.RecordBatch) (arrow.RecordBatch, int, error) {
	idx := rec.Schema().FieldIndices(Column)
	if len(idx) != 1 {
		return nil, 0, ErrNoColumn
	}
	flags, ok := rec.Column(idx[0]).(*array.Boolean)
	if !ok || flags.NullN() > 0 {
		return nil, 0, fmt.Errorf("%w: type %s, %d nulls", ErrNoColumn, rec.Column(idx[0]).DataType(), rec.Column(idx[0]).NullN())
	}
	real := RealRows(flags)
	for i := real; i < flags.Len(); i++ {
		if !flags.Value(i) {
			return nil, 0, fmt.Errorf("%w: row %d is real after padding row %d", ErrNotTrailing, i, real)
		}
	}
	dropped := withoutColumn(rec, idx[0])
	if real == int(rec.NumRows()) {
		return dropped, 0, nil
	}
	defer dropped.Release()
	return dropped.NewSlice(0, int64(real)), int(rec.NumRows()) - real, nil
}

// withoutColumn returns rec without column i, sharing the other columns.
func withoutColumn(rec arrow.RecordBatch, i int) arrow.RecordBatch {
	s := rec.Schema()
	fields := append(s.Fields()[:i:i], s.Fields()[i+1:]...)
	cols := append(rec.Columns()[:i:i], rec.Columns()[i+1:]...)
	md := s.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// RealRows returns the number of leading rows of a padding column that are
// not padding.
func RealRows(flags *array.Boolean) int {
	for i := range flags.Len() {
		if flags.Value(i) {
			return i
		}
	}
	return flags.Len()
}
