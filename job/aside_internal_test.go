package job

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Dropping rows from a record whose rows cannot be joined again (a list
// whose offsets run past its values) is an error, not a nil record that
// the job would go on to use.
func TestDropRowsJoinFails(t *testing.T) {
	// Not checked: arrow's Concatenate keeps the buffers of a join that
	// fails (garbage to the Go allocator, a leak to a checked one).
	mem := memory.NewGoAllocator()
	values := memory.NewResizableBuffer(mem)
	values.Resize(7 * arrow.Float32SizeBytes)
	offsets := memory.NewResizableBuffer(mem)
	offsets.Resize(4 * arrow.Int32SizeBytes)
	copy(arrow.Int32Traits.CastFromBytes(offsets.Bytes()), []int32{0, 3, 6, 9})
	child := array.NewData(arrow.PrimitiveTypes.Float32, 7, []*memory.Buffer{nil, values}, nil, 0, 0)
	data := array.NewData(arrow.ListOf(arrow.PrimitiveTypes.Float32), 3, []*memory.Buffer{nil, offsets}, []arrow.ArrayData{child}, 0, 0)
	list := array.MakeFromData(data)
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: list.DataType(), Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{list}, 3)
	for _, r := range []interface{ Release() }{values, offsets, child, data, list} {
		r.Release()
	}
	defer rec.Release()
	kept, err := dropRows(mem, rec, []badRow{{row: 1, reason: "test"}})
	if err == nil {
		kept.Release()
		t.Fatal("joined the rows around a dropped one without an error")
	}
	t.Log(err)
}
