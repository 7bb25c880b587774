package fileset

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// validate checks that an array read from an IPC file is what its
// lengths, offsets and child sizes say, with arrow-go's ValidateFull, on
// a view of its data that works around two of that validator's defects
// (docs/upstream/arrow-go-validate-null-union.md): a null-typed array
// has no buffers in IPC, and the validator wants one; a dense union of no
// rows has no offsets buffer, and the validator dereferences it. Neither
// is wrong, and every other check is the validator's own.
func validate(arr arrow.Array) error {
	if !needsView(arr.DataType()) {
		return array.ValidateFull(arr)
	}
	view := validationView(arr.Data())
	defer view.Release()
	a := array.MakeFromData(view)
	defer a.Release()
	return array.ValidateFull(a)
}

// needsView reports whether a type holds, anywhere, a null type or a
// dense union.
func needsView(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.NullType, *arrow.DenseUnionType:
		return true
	case *arrow.DictionaryType:
		return needsView(t.ValueType)
	case arrow.NestedType:
		for _, f := range t.Fields() {
			if needsView(f.Type) {
				return true
			}
		}
	}
	return false
}

// empty is the buffer an empty dense union's offsets get in the view.
var empty = memory.NewBufferBytes([]byte{})

// validationView returns d with each null-typed node given its one (nil)
// buffer and each empty dense union an empty offsets buffer; the caller
// releases it.
func validationView(d arrow.ArrayData) arrow.ArrayData {
	buffers := d.Buffers()
	switch d.DataType().ID() {
	case arrow.NULL:
		if len(buffers) == 0 {
			buffers = []*memory.Buffer{nil}
		}
	case arrow.DENSE_UNION:
		if len(buffers) == 3 && buffers[2] == nil && d.Len() == 0 {
			buffers = []*memory.Buffer{buffers[0], buffers[1], empty}
		}
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		children[i] = validationView(c)
	}
	var view arrow.ArrayData
	// Dictionary returns a typed nil for data without one.
	if dict, ok := d.Dictionary().(*array.Data); ok && dict != nil {
		dv := validationView(dict)
		view = array.NewDataWithDictionary(d.DataType(), d.Len(), buffers, d.NullN(), d.Offset(), dv.(*array.Data))
		dv.Release()
	} else {
		view = array.NewData(d.DataType(), d.Len(), buffers, children, d.NullN(), d.Offset())
	}
	for _, c := range children {
		c.Release()
	}
	return view
}
