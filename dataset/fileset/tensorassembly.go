package fileset

import (
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// regularRows returns how many rows of k present values (definition level
// valueDef) the levels start with, each one's end proven by the level
// after it starting a row.
func regularRows(def, rep []int16, k int, valueDef int16) int {
	present := equalPrefix(def, valueDef)
	m := 0
	for o := 0; o+k <= present && rep[o] == 0 && equalPrefix(rep[o+1:o+k], 1) == k-1; o += k {
		m++
	}
	if m > 0 && (m*k == len(rep) || rep[m*k] != 0) {
		m-- // the last row's end is not proven
	}
	return m
}

// equalPrefix returns how many of the levels, from the first, equal v;
// sixteen at a time (four words of four), then four, then one.
func equalPrefix(levels []int16, v int16) int {
	word := uint64(uint16(v)) * 0x0001_0001_0001_0001
	i := 0
	for ; i+16 <= len(levels); i += 16 {
		p := (*[4]uint64)(unsafe.Pointer(&levels[i]))
		if (p[0]^word)|(p[1]^word)|(p[2]^word)|(p[3]^word) != 0 {
			break
		}
	}
	for ; i+4 <= len(levels); i += 4 {
		if *(*uint64)(unsafe.Pointer(&levels[i])) != word {
			break
		}
	}
	for ; i < len(levels) && levels[i] == v; i++ {
	}
	return i
}

// assembly collects the rows of one read: list offsets over value slots,
// and where the null rows and null values are (rare, so listed).
type assembly struct {
	offsets    []int32 // 0, then each row's end slot
	slots      int64
	values     int
	nullRows   []int64 // row indices
	nullSlots  []int64 // slot indices holding a null value
	valueSlots []int64 // each value's slot, once values and slots part
}

func (a *assembly) startRow() { a.offsets = append(a.offsets, int32(a.slots)) }

// rows adds m rows of k present values each.
func (a *assembly) rows(m int64, k int) {
	for range m {
		a.slots += int64(k)
		a.offsets = append(a.offsets, int32(a.slots))
	}
	a.values += int(m) * k
}

func (a *assembly) value() {
	if a.valueSlots != nil {
		a.valueSlots = append(a.valueSlots, a.slots)
	}
	a.values++
	a.addSlot()
}

func (a *assembly) nullValue() {
	a.part()
	a.nullSlots = append(a.nullSlots, a.slots)
	a.addSlot()
}

func (a *assembly) addSlot() {
	a.slots++
	a.offsets[len(a.offsets)-1] = int32(a.slots)
}

func (a *assembly) nullRow() { a.nullRows = append(a.nullRows, int64(len(a.offsets)-2)) }

// part starts listing value slots: from the first null slot on, values
// and slots no longer coincide.
func (a *assembly) part() {
	if a.valueSlots == nil {
		a.valueSlots = make([]int64, a.values, a.values+16)
		for i := range a.valueSlots {
			a.valueSlots[i] = int64(i)
		}
	}
}

// endRow checks the row just assembled: a fixed_size_list row holds its
// width of values, or is null and takes its width of null slots, as
// pqarrow reads one.
func (a *assembly) endRow(t *tensorColumn) error {
	if a.slots+t.fixed > math.MaxInt32 {
		return t.errorf("%w: over 2^31 values in one read", errTensorColumn)
	}
	if t.fixed == 0 {
		return nil
	}
	r := len(a.offsets) - 2
	got := int64(a.offsets[r+1] - a.offsets[r])
	if len(a.nullRows) > 0 && a.nullRows[len(a.nullRows)-1] == int64(r) {
		a.part()
		for range t.fixed {
			a.nullSlots = append(a.nullSlots, a.slots)
			a.addSlot()
		}
		return nil
	}
	if got != t.fixed {
		return t.errorf("%w: a row of %d values in a fixed_size_list of %d", errTensorColumn, got, t.fixed)
	}
	return nil
}

// array builds the field's array of n rows from the first nv values
// decoded into values, in order.
func (a *assembly) array(t *tensorColumn, n int64, values *memory.Buffer, nv int) arrow.Array {
	slots := int(a.slots)
	valueBuf := values
	if a.valueSlots == nil {
		values.Retain()
		values.Resize(slots * arrow.Float32SizeBytes)
	} else {
		valueBuf = memory.NewResizableBuffer(t.mem)
		valueBuf.Resize(slots * arrow.Float32SizeBytes)
		out := arrow.Float32Traits.CastFromBytes(valueBuf.Bytes())
		clear(out) // null slots hold zeros
		in := arrow.Float32Traits.CastFromBytes(values.Bytes())[:nv]
		for i, s := range a.valueSlots {
			out[s] = in[i]
		}
	}
	defer valueBuf.Release()
	var valueValid, rowValid *memory.Buffer
	if len(a.nullSlots) > 0 {
		valueValid = validity(t.mem, slots, a.nullSlots)
		defer valueValid.Release()
	}
	if len(a.nullRows) > 0 {
		rowValid = validity(t.mem, int(n), a.nullRows)
		defer rowValid.Release()
	}
	elem := t.typ.(arrow.ListLikeType).Elem()
	child := array.NewData(elem, slots, []*memory.Buffer{valueValid, valueBuf}, nil, len(a.nullSlots), 0)
	defer child.Release()
	buffers := []*memory.Buffer{rowValid}
	if t.fixed == 0 {
		offsets := memory.NewResizableBuffer(t.mem)
		defer offsets.Release()
		offsets.Resize(int(n+1) * arrow.Int32SizeBytes)
		copy(arrow.Int32Traits.CastFromBytes(offsets.Bytes()), a.offsets)
		buffers = append(buffers, offsets)
	}
	data := array.NewData(t.typ, int(n), buffers, []arrow.ArrayData{child}, len(a.nullRows), 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// validity returns a bitmap of n bits, set but at the indices given.
func validity(mem memory.Allocator, n int, nulls []int64) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	bits := buf.Bytes()
	bitutil.SetBitsTo(bits, 0, int64(n), true)
	for _, i := range nulls {
		bitutil.ClearBit(bits, int(i))
	}
	return buf
}
