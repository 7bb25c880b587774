package dataset

import (
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/tensor"
)

// Generate returns a synthetic Dataset of rows rows, built chunk rows at a
// time: fill appends rows [start, start+n) to b, one value per field. Every
// range builds the records anew, so fill must be deterministic for the
// dataset to be re-runnable.
func Generate(mem memory.Allocator, schema *arrow.Schema, rows, chunk int, fill func(b *array.RecordBuilder, start, n int)) *Dataset {
	chunk = max(chunk, 1)
	return New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for start := 0; start < rows; start += chunk {
			n := min(chunk, rows-start)
			fill(b, start, n)
			if !yieldOwned(yield, b.NewRecordBatch()) {
				return
			}
		}
	})
}

// TensorSchema returns the schema of [UniformTensors]: an int64 "id" column
// and a fixed_size_list<float32>[width] "features" column, nullable like a
// column read back from most files, though it holds no nulls.
func TensorSchema(width int) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: tensor.Type(width), Nullable: true},
	}, nil)
}

// UniformTensors returns a synthetic dataset of [TensorSchema](width): ids
// 0..rows-1 and features drawn uniformly from [-1, 1), in records of chunk rows.
// The values depend on seed and chunk only.
func UniformTensors(mem memory.Allocator, rows, width, chunk int, seed uint64) *Dataset {
	return Generate(mem, TensorSchema(width), rows, chunk, func(b *array.RecordBuilder, start, n int) {
		// A generator per chunk keeps the dataset stateless, so concurrent
		// ranges over it are safe and see the same values.
		rng := rand.New(rand.NewPCG(seed, uint64(start)))
		ids := b.Field(0).(*array.Int64Builder)
		list := b.Field(1).(*array.FixedSizeListBuilder)
		vals := list.ValueBuilder().(*array.Float32Builder)
		ids.Reserve(n)
		list.Reserve(n)
		vals.Reserve(n * width)
		for i := range n {
			ids.UnsafeAppend(int64(start + i))
			list.Append(true)
			for range width {
				vals.UnsafeAppend(rng.Float32()*2 - 1)
			}
		}
	})
}
