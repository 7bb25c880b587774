package fileset

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// errTensorColumn marks a float list column whose levels do not describe
// the rows its row groups declare.
var errTensorColumn = errors.New("the column's levels do not match its rows")

// tensorColumn reads a list<float32> or fixed_size_list<float32> column of
// a Parquet file straight from its column chunks: the values land in the
// Arrow buffer as they are decoded, and the rows are cut from the
// repetition levels and typed from the definition levels (present, null,
// empty, null value) by this decoder, not by pqarrow's list assembly.
//
// Every row boundary is proven, the one after the last row of a read
// included: a row ends where the next level starts a new row, or where its
// row group's chunk ends with as many rows as the group declares. A chunk
// that does not prove it is an error naming the row group and file row.
type tensorColumn struct {
	pf    *file.Reader
	mem   memory.Allocator
	sel   selection
	leaf  int
	field int // index in the output schema
	name  string
	typ   arrow.DataType
	fixed int64 // a fixed_size_list's width; 0 for a list
	hint  int64 // values a row expected, to size reads

	// Definition levels: at listDef or above a row holds a value slot,
	// at listDef-1 it is empty, below it null; a slot at valueDef holds
	// a value, below it a null value.
	listDef, valueDef int16

	g     int   // index in sel.groups of the chunk being read, -1 before the first
	begun int64 // rows of that group begun
	// A chunk whose rows may all hold width values is read page by page
	// while its pages are uniform (uniformPage): pages, and the values of
	// the page being read not yet taken. The first page that is not, and
	// every other chunk, is read by arrow-go's column reader, cr.
	pages    file.PageReader
	pageVals []byte
	holdLast bool            // the page is a version 1 page: its last row may go on in the next
	held     []byte          // a version 1 page's last row, until the next page starts a row
	width    int64           // the values a row of the chunk holds if its rows are alike
	reps     *rowRepetitions // checks pages' repetition levels for rows of width
	counts   *pageCounts     // tests' count of them, or nil
	cr       *file.Float32ColumnChunkReader
	row      int64 // file row of the next row to yield
	carry    levels
	scratch  *memory.Buffer // definition then repetition levels
}

// levels are the levels and values read past the last row yielded: the
// start of the next row.
type levels struct {
	def, rep []int16
	vals     []float32
}

// newTensorColumn returns the reader of output field f (schema field sf of
// the file), or nil if the field is not one tensorColumn reads: a
// top-level list<float32> or fixed_size_list<float32> stored as one FLOAT
// leaf repeated once.
func newTensorColumn(pf *file.Reader, mem memory.Allocator, sel selection, field int, f arrow.Field, sf *pqarrow.SchemaField) *tensorColumn {
	var fixed int64
	switch t := f.Type.(type) {
	case *arrow.FixedSizeListType:
		if t.Elem().ID() != arrow.FLOAT32 || t.Len() <= 0 {
			return nil
		}
		fixed = int64(t.Len())
	case *arrow.ListType:
		if t.Elem().ID() != arrow.FLOAT32 {
			return nil
		}
	default:
		return nil
	}
	if len(sf.Children) != 1 || len(sf.Children[0].Children) != 0 || len(sel.groups) == 0 {
		return nil
	}
	leaf := sf.Children[0].ColIndex
	descr := pf.MetaData().Schema.Column(leaf)
	if descr.PhysicalType() != parquet.Types.Float || descr.MaxRepetitionLevel() != 1 || sf.LevelInfo.RepLevel != 1 ||
		sf.LevelInfo.DefLevel < 1 || sf.Children[0].LevelInfo.DefLevel != descr.MaxDefinitionLevel() {
		return nil
	}
	t := &tensorColumn{pf: pf, mem: mem, sel: sel, leaf: leaf, field: field, name: f.Name, typ: f.Type,
		fixed: fixed, hint: max(fixed, levelsPerRow(pf, sel.groups[0], leaf)), listDef: sf.LevelInfo.DefLevel, valueDef: descr.MaxDefinitionLevel(), g: -1}
	t.row = sel.starts[0]
	return t
}

// levelsPerRow is the levels a row of row group g holds in column leaf, as
// its metadata states (values, nulls included, over rows), at least 1: the
// size of a read's first request for levels. A hint, nothing more: the
// reads check every level.
func levelsPerRow(pf *file.Reader, g, leaf int) int64 {
	rg := pf.MetaData().RowGroup(g)
	col, err := rg.ColumnChunk(leaf)
	if err != nil || rg.NumRows() <= 0 || col.NumValues() <= 0 {
		return 1
	}
	return min(max(col.NumValues()/rg.NumRows(), 1), 1<<12) // wider rows grow the reads as they come
}

// read returns the next n rows as an array of the field's type. A row of
// a fixed_size_list must hold its width of values, or be null.
func (t *tensorColumn) read(n int64) (arr arrow.Array, err error) {
	defer t.recoverAt(&err)
	if n == 0 {
		return array.MakeArrayOfNull(t.mem, t.typ, 0), nil
	}
	values := memory.NewResizableBuffer(t.mem)
	defer values.Release()
	a := assembly{offsets: make([]int32, 1, n+1)}
	nl, nv := t.begin(n, values)
	lv := t.levelSlices()
	def, rep := lv.def, lv.rep
	vals := arrow.Float32Traits.CastFromBytes(values.Bytes())
	p, vi := 0, 0 // next level, next value
	inRow := false
	closed := int16(-1) // the definition level of the empty or null row being assembled
	rowStart, empties := 0, 0
	done := func() int64 { return int64(len(a.offsets) - 1) }
	for {
		for ; p < nl; p++ {
			d, r := def[p], rep[p]
			if r == 0 {
				if inRow {
					if err := a.endRow(t); err != nil {
						return nil, err
					}
					t.row++
					inRow = false
					if done() == n {
						break
					}
				}
				if t.begun == t.groupRows() {
					return nil, t.errorf("%w: row group %d holds more rows than the %d it declares", errTensorColumn, t.sel.groups[t.g], t.groupRows())
				}
				if a.valueSlots == nil {
					// The common case, rows of hint present values, in bulk.
					k := int(t.hint)
					m := min(int64(regularRows(def[p:nl], rep[p:nl], k, t.valueDef)), n-done(), t.groupRows()-t.begun)
					if m > 0 && a.slots+m*int64(k) <= math.MaxInt32 {
						a.rows(m, k)
						vi += int(m) * k
						t.begun += m
						t.row += m
						if p += int(m) * k; done() == n {
							break // p starts the row after the n-th
						}
						p-- // the loop's p++ comes back to the row's start
						continue
					}
				}
				inRow, closed, rowStart = true, -1, p
				t.begun++
				a.startRow()
			} else if r != 1 || !inRow {
				return nil, t.errorf("%w: repetition level %d at level %d of a row", errTensorColumn, r, p-rowStart)
			} else if closed >= 0 {
				// DuckDB writes a null fixed-size array as its width of
				// null levels: more of the same level add nothing.
				if d != closed {
					return nil, t.errorf("%w: an empty or null row continues with definition level %d", errTensorColumn, d)
				}
				continue
			}
			switch {
			case d > t.valueDef || d < 0:
				return nil, t.errorf("%w: definition level %d outside 0-%d", errTensorColumn, d, t.valueDef)
			case d == t.valueDef:
				a.value()
				vi++
			case d >= t.listDef:
				a.nullValue()
			default: // an empty or null row: its only level
				if r != 0 {
					return nil, t.errorf("%w: definition level %d inside a row", errTensorColumn, d)
				}
				closed = d
				if d < t.listDef-1 {
					a.nullRow()
				}
			}
		}
		if p < nl {
			break // stopped at the start of the row after the n-th
		}
		if vi > nv {
			return nil, t.errorf("%w: %d values for %d present levels", errTensorColumn, nv, vi)
		}
		if t.pages != nil && a.valueSlots != nil {
			// Rows of this read hold null values: the rest through the
			// column reader, which keeps their slots.
			if err := t.fallBack(); err != nil {
				return nil, err
			}
		}
		if t.pages != nil {
			m, err := t.fromPages(&a, values, nv, n-done())
			if err != nil {
				return nil, err
			}
			vi += int(m * t.width)
			nv = vi
			vals = arrow.Float32Traits.CastFromBytes(values.Bytes())
			switch {
			case done() == n:
			case t.pages != nil || t.cr != nil:
				continue // the next page; or the column reader, from a page not uniform on
			default: // the chunk ended, every row it declares read
				if err := t.nextGroup(); err != nil {
					return nil, err
				}
				continue
			}
			break
		}
		// More levels: from this group's chunk, or the next group's.
		if t.cr != nil && t.cr.HasNext() {
			perRow := t.hint
			if done() > 0 {
				perRow = max(perRow, (int64(p)+done()-1)/done())
			}
			want := (n-done())*perRow + 1
			if inRow {
				want -= int64(p - rowStart)
			}
			want = max(want, 1)
			def, rep, vals = t.grow(values, nl, nv, want)
			got, gotv, err := t.cr.ReadBatch(want, vals[nv:nv+int(want)], def[nl:nl+int(want)], rep[nl:nl+int(want)])
			if err != nil {
				return nil, t.errorf("%w", err)
			}
			if got == 0 {
				if empties++; empties > 1 {
					return nil, t.errorf("%w: the chunk reads no levels but has more", errTensorColumn)
				}
			}
			nl, nv = nl+int(got), nv+gotv
			continue
		}
		if t.cr != nil {
			if err := t.cr.Err(); err != nil {
				return nil, t.errorf("%w", err)
			}
			if vi != nv {
				return nil, t.errorf("%w: %d values for %d present levels", errTensorColumn, nv, vi)
			}
			if inRow {
				if err := a.endRow(t); err != nil {
					return nil, err
				}
				t.row++
				inRow = false
			}
			if t.begun != t.groupRows() {
				return nil, t.errorf("%w: row group %d declares %d rows, its chunk holds %d", errTensorColumn, t.sel.groups[t.g], t.groupRows(), t.begun)
			}
			if done() == n {
				break
			}
		}
		if err := t.nextGroup(); err != nil {
			return nil, err
		}
	}
	if vi > nv {
		return nil, t.errorf("%w: %d values for %d present levels", errTensorColumn, nv, vi)
	}
	if done() > 0 {
		t.hint = max(t.hint, (int64(vi)+done()-1)/done())
	}
	t.carry = levels{
		def:  append(t.carry.def[:0], def[p:nl]...),
		rep:  append(t.carry.rep[:0], rep[p:nl]...),
		vals: append(t.carry.vals[:0], vals[vi:nv]...),
	}
	return a.array(t, n, values, vi), nil
}

// recoverAt turns a panic of the decoder (a damaged page) into an error
// naming where it stopped; an allocation over the read's memory ceiling
// goes on up to the file's guard, which names the ceiling.
func (t *tensorColumn) recoverAt(err *error) {
	if p := recover(); p != nil {
		if _, ok := p.(errOverCeiling); ok {
			panic(p)
		}
		*err = t.errorf("the decoder panicked: %v", p)
	}
}

// begin sizes the values for a read of n rows and puts the carried
// levels and values at the start of theirs; it returns their counts. The
// level scratch grows when levels are read (grow): a chunk read page by
// page needs none.
func (t *tensorColumn) begin(n int64, values *memory.Buffer) (nl, nv int) {
	want := int(n*t.hint) + 1 + len(t.carry.def)
	t.growLevels(len(t.carry.def) + 1)
	values.Resize(max(want, len(t.carry.vals)) * arrow.Float32SizeBytes)
	lv := t.levelSlices()
	copy(lv.def, t.carry.def)
	copy(lv.rep, t.carry.rep)
	copy(arrow.Float32Traits.CastFromBytes(values.Bytes()), t.carry.vals)
	return len(t.carry.def), len(t.carry.vals)
}

// grow makes room for want more levels and values past nl and nv.
func (t *tensorColumn) grow(values *memory.Buffer, nl, nv int, want int64) (def, rep []int16, vals []float32) {
	if need := nl + int(want); need > len(t.levelSlices().def) {
		old := t.levelSlices()
		keepDef, keepRep := append([]int16(nil), old.def[:nl]...), append([]int16(nil), old.rep[:nl]...)
		t.growLevels(max(need, 2*len(old.def)))
		lv := t.levelSlices()
		copy(lv.def, keepDef)
		copy(lv.rep, keepRep)
	}
	if need := (nv + int(want)) * arrow.Float32SizeBytes; need > values.Len() {
		values.Resize(max(need, 2*values.Len()))
	}
	lv := t.levelSlices()
	return lv.def, lv.rep, arrow.Float32Traits.CastFromBytes(values.Bytes())
}

func (t *tensorColumn) growLevels(n int) {
	if t.scratch == nil {
		t.scratch = memory.NewResizableBuffer(t.mem)
	}
	if need := 2 * n * arrow.Int16SizeBytes; t.scratch.Len() < need {
		t.scratch.Resize(need)
	}
}

// levelSlices returns the definition and repetition scratch, each half.
func (t *tensorColumn) levelSlices() levels {
	lv := arrow.Int16Traits.CastFromBytes(t.scratch.Bytes())
	half := len(lv) / 2
	return levels{def: lv[:half:half], rep: lv[half:]}
}

// errorf names the column, row group and file row where reading stopped.
func (t *tensorColumn) errorf(format string, args ...any) error {
	where := fmt.Sprintf("column %q", t.name)
	if t.g >= 0 {
		where += fmt.Sprintf(", row group %d, file row %d", t.sel.groups[t.g], t.row)
	}
	return fmt.Errorf("%s: %w", where, fmt.Errorf(format, args...))
}

func (t *tensorColumn) release() {
	t.closeChunk()
	if t.scratch != nil {
		t.scratch.Release()
		t.scratch = nil
	}
}
