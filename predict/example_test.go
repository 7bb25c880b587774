package predict_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/predict"
)

// points returns a record of 5 two-feature rows with ids.
func points(mem memory.Allocator) arrow.RecordBatch {
	schema := dataset.TensorSchema(2)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{10, 11, 12, 13, 14}, nil)
	list := b.Field(1).(*array.FixedSizeListBuilder)
	for _, xy := range [][2]float32{{1, 0}, {0, 1}, {2, 1}, {-1, 3}, {5, 4}} {
		list.Append(true)
		list.ValueBuilder().(*array.Float32Builder).AppendValues(xy[:], nil)
	}
	return b.NewRecordBatch()
}

// A model that picks the larger of two features, run in batches of 2: the
// third batch is padded, and the padding never reaches the consumer.
func Example() {
	mem := memory.DefaultAllocator
	rec := points(mem)
	defer rec.Release()

	model := cpu.NewSoftmaxRegression(2, 2)
	model.Layers[0].Weights = []float32{1, 0, 0, 1} // class = argmax(x, y)

	p, err := predict.New(model, predict.WithBatchSize(2), predict.WithPassthrough("id"))
	if err != nil {
		panic(err)
	}
	for r := range p.Predict(context.Background(), dataset.FromRecords(rec.Schema(), rec)) {
		if r.Err != nil {
			panic(r.Err)
		}
		ids, classes := r.Record.Column(0).(*array.Int64), r.Record.Column(1).(*array.Int64)
		for i := range ids.Len() {
			fmt.Printf("batch %d: id %d -> class %d\n", r.Batch, ids.Value(i), classes.Value(i))
		}
		r.Record.Release()
	}
	// The channel is closed: the session has shut down.

	// Output:
	// batch 0: id 10 -> class 0
	// batch 0: id 11 -> class 1
	// batch 1: id 12 -> class 0
	// batch 1: id 13 -> class 1
	// batch 2: id 14 -> class 0
}

// The iterator form: break shuts the device down before the loop ends.
func ExamplePredictor_All() {
	mem := memory.DefaultAllocator
	rec := points(mem)
	defer rec.Release()

	p, err := predict.New(cpu.NewSoftmaxRegression(2, 3), predict.WithBatchSize(4))
	if err != nil {
		panic(err)
	}
	for preds, err := range p.All(context.Background(), dataset.FromRecords(rec.Schema(), rec)) {
		if err != nil {
			panic(err)
		}
		fmt.Println(preds.NumRows(), "predictions:", preds.Schema().Field(0).Name, preds.Schema().Field(1).Name)
		break
	}
	// Output:
	// 4 predictions: class probabilities
}
