package dataset

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// tensorColumn reads a list<float32> or fixed_size_list<float32> column of
// a Parquet file straight from its column chunks, for files where every row
// holds k present values: the values land in the Arrow buffer as they are
// decoded, and the row boundaries are checked against k instead of being
// rebuilt value by value (pqarrow's list assembly, about half the cost of
// decoding a tensor column). Anything else — a null or empty row, a null
// value, a ragged row, a decoding error — makes read report false, and the
// caller reads the rest of the file through pqarrow, which decides what
// such rows are.
type tensorColumn struct {
	pf      *file.Reader
	mem     memory.Allocator
	groups  []int // the row groups to read, in order
	leaf    int
	field   int // index in the output schema
	typ     arrow.DataType
	k       int64
	maxDef  int16
	g       int   // index in groups of the group being read, -1 before the first
	left    int64 // rows of that group not read yet
	cr      *file.Float32ColumnChunkReader
	scratch *memory.Buffer // definition then repetition levels
}

// newTensorColumn returns the reader of output field f, or nil if the field
// is not one tensorColumn reads: a top-level list<float32> or
// fixed_size_list<float32> stored as one repeated FLOAT leaf. A list's k is
// its first row's length.
func newTensorColumn(pf *file.Reader, mem memory.Allocator, groups []int, field int, f arrow.Field, leaves []int) *tensorColumn {
	var k int64
	switch t := f.Type.(type) {
	case *arrow.FixedSizeListType:
		if t.Elem().ID() != arrow.FLOAT32 || t.Len() <= 0 {
			return nil
		}
		k = int64(t.Len())
	case *arrow.ListType:
		if t.Elem().ID() != arrow.FLOAT32 {
			return nil
		}
	default:
		return nil
	}
	if len(leaves) != 1 || len(groups) == 0 {
		return nil
	}
	descr := pf.MetaData().Schema.Column(leaves[0])
	if descr.PhysicalType() != parquet.Types.Float || descr.MaxRepetitionLevel() != 1 {
		return nil
	}
	t := &tensorColumn{pf: pf, mem: mem, groups: groups, leaf: leaves[0], field: field, typ: f.Type,
		k: k, maxDef: descr.MaxDefinitionLevel(), g: -1}
	if t.k == 0 {
		t.k = t.firstRowLength()
	}
	if t.k <= 0 || t.k > math.MaxInt32 {
		return nil
	}
	return t
}

// firstRowLength reads the start of the first group's chunk to learn the
// length of its first row, or returns 0 if that row is not all present
// values or is longer than the look.
func (t *tensorColumn) firstRowLength() (k int64) {
	defer func() {
		if recover() != nil {
			k = 0
		}
	}()
	rg := t.pf.RowGroup(t.groups[0])
	col, err := rg.Column(t.leaf)
	if err != nil {
		return 0
	}
	defer col.Close()
	cr, ok := col.(*file.Float32ColumnChunkReader)
	if !ok {
		return 0
	}
	const look = 1 << 14
	vals, def, rep := make([]float32, look), make([]int16, look), make([]int16, look)
	n, _, err := cr.ReadBatch(look, vals, def, rep)
	if err != nil || n == 0 {
		return 0
	}
	if rep[0] != 0 {
		return 0
	}
	for i := range n {
		if i > 0 && rep[i] == 0 {
			return i
		}
		if def[i] != t.maxDef {
			return 0
		}
	}
	if n < look && rg.NumRows() == 1 {
		return n
	}
	return 0
}

// read returns the next n rows, or false if they are not n rows of k
// present values each, or cannot be decoded.
func (t *tensorColumn) read(n int64) (arr arrow.Array, ok bool) {
	levels := n * t.k
	if levels > math.MaxInt32 {
		return nil, false
	}
	values := memory.NewResizableBuffer(t.mem)
	defer values.Release()
	defer func() {
		// A damaged page or an allocation over the read's ceiling:
		// pqarrow reads the rest and reports it.
		if recover() != nil {
			arr, ok = nil, false
		}
	}()
	values.Resize(int(levels) * arrow.Float32SizeBytes)
	if t.scratch == nil {
		t.scratch = memory.NewResizableBuffer(t.mem)
	}
	if need := 2 * int(levels) * arrow.Int16SizeBytes; t.scratch.Len() < need {
		t.scratch.Resize(need)
	}
	lv := arrow.Int16Traits.CastFromBytes(t.scratch.Bytes())
	def, rep := lv[:levels], lv[levels:2*levels]
	vals := arrow.Float32Traits.CastFromBytes(values.Bytes())
	for at := int64(0); at < levels; {
		if t.left == 0 && !t.nextGroup() {
			return nil, false
		}
		want := min(levels-at, t.left*t.k)
		got, nv, err := t.cr.ReadBatch(want, vals[at:at+want], def[at:at+want], rep[at:at+want])
		if err != nil || got != want || int64(nv) != want {
			return nil, false
		}
		at += want
		t.left -= want / t.k
	}
	if !t.regular(def, rep) {
		return nil, false
	}
	return t.array(n, values), true
}

// nextGroup opens the next group's chunk, after checking that the one read
// holds no more values than its rows.
func (t *tensorColumn) nextGroup() bool {
	if t.cr != nil && t.cr.HasNext() {
		return false
	}
	if t.g+1 >= len(t.groups) {
		return false
	}
	t.closeChunk()
	t.g++
	rg := t.pf.RowGroup(t.groups[t.g])
	col, err := rg.Column(t.leaf)
	if err != nil {
		return false
	}
	cr, ok := col.(*file.Float32ColumnChunkReader)
	if !ok {
		col.Close()
		return false
	}
	t.cr, t.left = cr, rg.NumRows()
	return true
}

// finished reports whether every selected row was read and the last chunk
// holds no more values.
func (t *tensorColumn) finished() (done bool) {
	defer func() {
		if recover() != nil {
			done = false
		}
	}()
	for t.left == 0 && t.g+1 < len(t.groups) {
		if !t.nextGroup() {
			return false
		}
	}
	return t.left == 0 && t.g == len(t.groups)-1 && !t.cr.HasNext()
}

// regular reports whether the levels are rows of k present values: every
// definition level at its maximum, a repetition level of 0 starting each
// row and 1 inside it.
func (t *tensorColumn) regular(def, rep []int16) bool {
	for _, d := range def {
		if d != t.maxDef {
			return false
		}
	}
	k := int(t.k)
	for start := 0; start < len(rep); start += k {
		row := rep[start : start+k]
		if row[0] != 0 {
			return false
		}
		for _, r := range row[1:] {
			if r != 1 {
				return false
			}
		}
	}
	return true
}

// array wraps n rows of k values as the field's type.
func (t *tensorColumn) array(n int64, values *memory.Buffer) arrow.Array {
	var elem arrow.DataType
	buffers := []*memory.Buffer{nil}
	switch typ := t.typ.(type) {
	case *arrow.FixedSizeListType:
		elem = typ.Elem()
	case *arrow.ListType:
		elem = typ.Elem()
		offsets := memory.NewResizableBuffer(t.mem)
		defer offsets.Release()
		offsets.Resize(int(n+1) * arrow.Int32SizeBytes)
		o := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
		for i := range o {
			o[i] = int32(int64(i) * t.k)
		}
		buffers = append(buffers, offsets)
	}
	child := array.NewData(elem, int(n*t.k), []*memory.Buffer{nil, values}, nil, 0, 0)
	defer child.Release()
	data := array.NewData(t.typ, int(n), buffers, []arrow.ArrayData{child}, 0, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (t *tensorColumn) closeChunk() {
	if t.cr != nil {
		t.cr.Close()
		t.cr = nil
	}
}

func (t *tensorColumn) release() {
	t.closeChunk()
	if t.scratch != nil {
		t.scratch.Release()
		t.scratch = nil
	}
}
