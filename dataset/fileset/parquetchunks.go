package fileset

import (
	"encoding/binary"
	"math"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// A tensor column's row groups, its chunk in each, and the chunk's
// pages read page by page while they are uniform.

// groupRows returns the rows the current row group selects (0 before
// the first).
func (t *tensorColumn) groupRows() int64 {
	if t.g < 0 {
		return 0
	}
	return t.sel.sizes[t.g]
}

// nextGroup opens the next row group's chunk: a fixed_size_list's page
// by page, any other through the column reader.
func (t *tensorColumn) nextGroup() error {
	if t.g+1 >= len(t.sel.groups) {
		return t.errorf("%w: the row groups read hold fewer rows than asked for", errTensorColumn)
	}
	t.closeChunk()
	t.g++
	t.begun = 0
	t.row = t.sel.starts[t.g]
	if t.width = t.uniformWidth(); t.width > 0 {
		if pr, err := t.pf.RowGroup(t.sel.groups[t.g]).GetColumnPageReader(t.leaf); err == nil {
			t.pages = pr
			return nil
		} // else the column reader names the error
	}
	return t.openColumnReader()
}

// uniformWidth returns the values each row of the chunk would hold were
// its rows alike, the chunk a candidate for reading page by page: a
// fixed_size_list's width; for a list, the chunk's levels over its rows,
// when they divide evenly (the pages then prove it, or are read through
// the column reader). 0: not a candidate.
func (t *tensorColumn) uniformWidth() int64 {
	rg := t.pf.MetaData().RowGroup(t.sel.groups[t.g])
	col, err := rg.ColumnChunk(t.leaf)
	if err != nil || rg.NumRows() <= 0 {
		return 0
	}
	if t.fixed > 0 {
		return t.fixed
	}
	if n := col.NumValues(); n > 0 && n%rg.NumRows() == 0 {
		return n / rg.NumRows()
	}
	return 0
}

// openColumnReader opens the chunk's column reader.
func (t *tensorColumn) openColumnReader() error {
	col, err := t.pf.RowGroup(t.sel.groups[t.g]).Column(t.leaf)
	if err != nil {
		return t.errorf("%w", err)
	}
	cr, ok := col.(*file.Float32ColumnChunkReader)
	if !ok {
		col.Close()
		return t.errorf("%w: not a float column chunk", errTensorColumn)
	}
	t.cr = cr
	return nil
}

// finished checks that the read ended where the selection does: no level
// left over, every chunk read to its end.
func (t *tensorColumn) finished() (err error) {
	defer t.recoverAt(&err)
	for {
		if t.pages != nil {
			if len(t.pageVals) > 0 || len(t.held) > 0 || t.pages.Next() {
				return t.errorf("%w: row group %d holds more levels than its %d rows", errTensorColumn, t.sel.groups[t.g], t.groupRows())
			}
			if err := t.pages.Err(); err != nil {
				return t.errorf("%w", err)
			}
		}
		if len(t.carry.def) > 0 || (t.cr != nil && t.cr.HasNext()) {
			return t.errorf("%w: row group %d holds more levels than its %d rows", errTensorColumn, t.sel.groups[t.g], t.groupRows())
		}
		if t.cr != nil {
			if err := t.cr.Err(); err != nil {
				return t.errorf("%w", err)
			}
		}
		// Empty row groups after the last row read (or in place of any
		// row): each one's chunk is checked to hold no level.
		if t.g+1 < len(t.sel.groups) && t.sel.sizes[t.g+1] == 0 && t.begun == t.groupRows() {
			if err := t.nextGroup(); err != nil {
				return err
			}
			continue
		}
		break
	}
	if t.g != len(t.sel.groups)-1 || t.begun != t.groupRows() {
		return t.errorf("%w: fewer rows than the row groups declare", errTensorColumn)
	}
	return nil
}

func (t *tensorColumn) closeChunk() {
	if t.pages != nil {
		t.pages.Close()
		t.pages, t.pageVals, t.holdLast = nil, nil, false
		t.held = t.held[:0]
	}
	if t.cr != nil {
		t.cr.Close()
		t.cr = nil
	}
}

// fromPages takes up to want rows from the chunk's uniform pages: their
// values into values from value nv on, their rows into a, their levels
// only checked (uniformPage). It returns the rows taken, after which
// t.pages is nil if the chunk ended (every row it declares read, or an
// error) or its next page is not uniform (t.cr then reads on).
//
// A version 1 page may end inside a row that the next page goes on with,
// and its levels cannot tell: its last row is held (t.held) until the
// next page starts a row, or the chunk ends. If the next page is not
// uniform, the column reader reads the held row again, whole.
func (t *tensorColumn) fromPages(a *assembly, values *memory.Buffer, nv int, want int64) (int64, error) {
	rowBytes := int(t.width) * arrow.Float32SizeBytes
	for t.pageRows(rowBytes) == 0 {
		if t.holdLast && len(t.pageVals) > 0 {
			t.held = append(t.held[:0], t.pageVals...) // the page's buffer goes with Next
			t.pageVals = nil
		}
		if !t.pages.Next() {
			if err := t.pages.Err(); err != nil {
				return 0, t.errorf("%w", err)
			}
			var m int64
			if len(t.held) > 0 { // the chunk's end ends its last row
				var err error
				if m, err = t.takeRows(a, values, nv, t.held, 1); err != nil {
					return 0, err
				}
				t.held = t.held[:0]
			}
			t.closeChunk()
			if t.begun != t.groupRows() {
				return 0, t.errorf("%w: row group %d declares %d rows, its chunk holds %d", errTensorColumn, t.sel.groups[t.g], t.groupRows(), t.begun)
			}
			return m, nil
		}
		pg := t.pages.Page()
		vals, ok := t.uniformPage(pg)
		if !ok {
			t.held = t.held[:0]
			return 0, t.fallBack()
		}
		if t.counts != nil {
			t.counts.uniform.Add(1)
		}
		_, t.holdLast = pg.(*file.DataPageV1)
		t.pageVals = vals
		if len(t.held) > 0 { // the page starts a row: the held one ended with its page
			m, err := t.takeRows(a, values, nv, t.held, 1)
			t.held = t.held[:0]
			return m, err
		}
	}
	m, err := t.takeRows(a, values, nv, t.pageVals, min(int64(t.pageRows(rowBytes)), want))
	t.pageVals = t.pageVals[int(m)*rowBytes:]
	return m, err
}

// pageRows is the rows of the page being read that may be given out.
func (t *tensorColumn) pageRows(rowBytes int) int {
	n := len(t.pageVals) / rowBytes
	if t.holdLast && n > 0 {
		n--
	}
	return n
}

// takeRows gives out up to m rows of width values from src: their values
// into values from value nv on, their rows into a. It returns the rows
// taken: fewer than m if the row group declares fewer, none (an error)
// if it declares no more.
func (t *tensorColumn) takeRows(a *assembly, values *memory.Buffer, nv int, src []byte, m int64) (int64, error) {
	k := t.width
	m = min(m, (math.MaxInt32-a.slots)/k)
	if left := t.groupRows() - t.begun; m > left {
		if left == 0 {
			return 0, t.errorf("%w: row group %d holds more rows than the %d it declares", errTensorColumn, t.sel.groups[t.g], t.groupRows())
		}
		m = left
	}
	if m == 0 {
		return 0, t.errorf("%w: a read of more than %d values", errTensorColumn, math.MaxInt32)
	}
	size := int(m*k) * arrow.Float32SizeBytes
	if need := nv*arrow.Float32SizeBytes + size; need > values.Len() {
		values.Resize(max(need, 2*values.Len()))
	}
	copy(values.Bytes()[nv*arrow.Float32SizeBytes:], src[:size])
	a.rows(m, int(k))
	t.begun += m
	t.row += m
	return m, nil
}

// uniformPage returns the values of a page of whole rows whose levels are
// those of rows of width values (every row present, every value too),
// stored plain: a version 1 or 2 data page, levels in the hybrid
// encoding. Any other page (a dictionary, nulls, a row cut by the page's
// end, another encoding) is not: false.
func (t *tensorColumn) uniformPage(pg file.Page) ([]byte, bool) {
	var rep, def, data []byte
	count := int(pg.NumValues())
	if parquet.Encoding(pg.Encoding()) != parquet.Encodings.Plain {
		return nil, false
	}
	switch p := pg.(type) {
	case *file.DataPageV1:
		if p.RepetitionLevelEncoding() != parquet.Encodings.RLE || p.DefinitionLevelEncoding() != parquet.Encodings.RLE {
			return nil, false
		}
		var ok bool
		if rep, data, ok = lengthPrefixed(p.Data()); !ok {
			return nil, false
		}
		if def, data, ok = lengthPrefixed(data); !ok {
			return nil, false
		}
	case *file.DataPageV2:
		data = p.Data()
		rl, dl := int(p.RepetitionLevelByteLen()), int(p.DefinitionLevelByteLen())
		if p.NumNulls() != 0 || int64(p.NumRows())*t.width != int64(count) || rl < 0 || dl < 0 || rl+dl > len(data) {
			return nil, false
		}
		rep, def, data = data[:rl], data[rl:rl+dl], data[rl+dl:]
	default:
		return nil, false
	}
	if k := int(t.width); t.reps == nil || t.reps.width != k {
		t.reps = newRowRepetitions(k)
	}
	if count == 0 || len(data) != count*arrow.Float32SizeBytes || !t.reps.match(rep, count) ||
		!definitionPattern(def, levelBits(t.valueDef), count, t.valueDef) {
		return nil, false
	}
	return data, true
}

// pageCounts counts, for tests, the pages tensor columns took as uniform
// and the chunks they fell back in.
type pageCounts struct{ uniform, fallBacks atomic.Int64 }

// lengthPrefixed splits a version 1 page's levels, their length first
// (4 bytes, little-endian), from what follows them.
func lengthPrefixed(b []byte) (levels, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// fallBack reads the rest of the chunk through the column reader, from
// the row after the ones taken from its uniform pages: those rows'
// levels and values are read again and passed over.
func (t *tensorColumn) fallBack() error {
	if t.counts != nil {
		t.counts.fallBacks.Add(1)
	}
	t.pages.Close()
	t.pages, t.pageVals, t.holdLast = nil, nil, false
	t.held = t.held[:0]
	if err := t.openColumnReader(); err != nil {
		return err
	}
	skip := t.begun * t.width
	const step = 1 << 14
	def, rep, vals := make([]int16, step), make([]int16, step), make([]float32, step)
	for skip > 0 {
		got, _, err := t.cr.ReadBatch(min(skip, step), vals, def, rep)
		if err != nil {
			return t.errorf("%w", err)
		}
		if got == 0 {
			return t.errorf("%w: the chunk ends inside the rows read", errTensorColumn)
		}
		skip -= got
	}
	return nil
}
