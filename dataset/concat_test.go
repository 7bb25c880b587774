package dataset_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// Concat gives what Arrow's Concatenate gives, column by column, for
// slices at any offset: fixed-width columns and tensors (copied bytes to
// bytes), tensors whose values start at an offset of their own, and the
// columns it leaves to Arrow (nulls, booleans, strings).
func TestConcatMatchesArrow(t *testing.T) {
	mem := arrowtest.Allocator(t)
	const n = 300
	r := rand.New(rand.NewPCG(3, 4))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "x", Type: arrow.PrimitiveTypes.Float32},
		{Name: "small", Type: arrow.PrimitiveTypes.Int8},
		{Name: "tensor", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)},
		{Name: "shifted", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64)},
		{Name: "nulls", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(i * 1000))
		b.Field(2).(*array.Float32Builder).Append(r.Float32())
		b.Field(3).(*array.Int8Builder).Append(int8(i))
		tb := b.Field(4).(*array.FixedSizeListBuilder)
		tb.Append(true)
		tb.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(i), r.Float32(), -1}, nil)
		fb := b.Field(5).(*array.FixedSizeListBuilder) // replaced below
		fb.Append(true)
		fb.ValueBuilder().(*array.Float64Builder).AppendValues([]float64{0, 0}, nil)
		b.Field(6).(*array.Int32Builder).AppendValues([]int32{int32(i)}, []bool{i%7 != 0})
		b.Field(7).(*array.BooleanBuilder).Append(i%3 == 0)
		b.Field(8).(*array.StringBuilder).Append(string(rune('a' + i%26)))
	}
	// A tensor column whose values array starts 10 values in.
	vb := array.NewFloat64Builder(mem)
	defer vb.Release()
	for i := range 2*n + 10 {
		vb.Append(float64(i) / 3)
	}
	vals := vb.NewArray()
	defer vals.Release()
	shiftedVals := array.NewSlice(vals, 10, int64(2*n+10))
	defer shiftedVals.Release()
	shiftedData := array.NewData(schema.Field(5).Type, n, []*memory.Buffer{nil}, []arrow.ArrayData{shiftedVals.Data()}, 0, 0)
	defer shiftedData.Release()
	shifted := array.MakeFromData(shiftedData)
	defer shifted.Release()
	cols := b.NewRecordBatch()
	defer cols.Release()
	arrays := slices.Clone(cols.Columns())
	arrays[5] = shifted
	whole := array.NewRecordBatch(schema, arrays, n)
	defer whole.Release()

	for _, cut := range [][]int64{{0, 0, 1, 1, 2}, {0, 1, 2, 3}, {5, 6, 100, 101, 299, 300}, {17, 150, 151, 152, 240}} {
		var parts []arrow.RecordBatch
		for i := 0; i+1 < len(cut); i++ {
			parts = append(parts, whole.NewSlice(cut[i], cut[i+1]))
		}
		got, err := dataset.Concat(mem, schema, parts)
		if err != nil {
			t.Fatal(err)
		}
		for c := range schema.NumFields() {
			in := make([]arrow.Array, len(parts))
			for i, p := range parts {
				in[i] = p.Column(c)
			}
			want, err := array.Concatenate(in, mem)
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(got.Column(c), want) {
				t.Errorf("cuts %v: column %q:\n got %v\nwant %v", cut, schema.Field(c).Name, got.Column(c), want)
			}
			want.Release()
		}
		got.Release()
		for _, p := range parts {
			p.Release()
		}
	}
}
