package eval_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/predict"
)

// Five labelled rows evaluated in batches of 2: the third batch is padded,
// and the padding row is not counted.
func ExampleEvaluate() {
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for _, row := range []struct {
		label int64
		x, y  float32
	}{{0, 2, 1}, {1, 0, 3}, {1, 1, 2}, {0, 5, 4}, {1, 3, 2}} {
		b.Field(0).(*array.Int64Builder).Append(row.label)
		list := b.Field(1).(*array.FixedSizeListBuilder)
		list.Append(true)
		list.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{row.x, row.y}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	model := cpu.NewSoftmaxRegression(2, 2)
	model.Layers[0].Weights = []float32{1, 0, 0, 1} // class = the larger feature

	report, err := eval.Evaluate(context.Background(), model, dataset.FromRecords(schema, rec), "label",
		[]eval.Metric{eval.Accuracy(), eval.ConfusionMatrix(2)}, predict.WithBatchSize(2))
	if err != nil {
		panic(err)
	}
	fmt.Printf("rows=%d accuracy=%.1f\n", report.Rows, report.Values["accuracy"])
	// Output:
	// rows=5 accuracy=0.8
}
