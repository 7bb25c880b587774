// Command eval fits a softmax-regression model to Gaussian blobs with gonum
// and evaluates it on held-out rows whose count (537) does not divide the
// batch size (64): the metrics are exact all the same, every row counted
// once and no padding row counted at all.
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"gonum.org/v1/gonum/mat"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

const (
	classes   = 3
	dims      = 8
	trainRows = 1000
	testRows  = 537
	batchSize = 64
)

func main() {
	if err := run(context.Background(), os.Stdout, memory.DefaultAllocator); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

// blobs draws n points: class i % classes around its own center.
func blobs(rng *rand.Rand, centers *mat.Dense, n int) (*mat.Dense, []int) {
	x := mat.NewDense(n, dims, nil)
	labels := make([]int, n)
	for i := range n {
		labels[i] = rng.IntN(classes)
		for j := range dims {
			x.Set(i, j, centers.At(labels[i], j)+rng.NormFloat64())
		}
	}
	return x, labels
}

func run(ctx context.Context, w io.Writer, mem memory.Allocator) error {
	rng := rand.New(rand.NewPCG(2026, 11))
	centers := mat.NewDense(classes, dims, nil)
	for i := range classes {
		for j := range dims {
			centers.Set(i, j, rng.NormFloat64()*1.2)
		}
	}
	trainX, trainY := blobs(rng, centers, trainRows)
	testX, testY := blobs(rng, centers, testRows)

	model, err := cpu.FitSoftmaxRegression(trainX, trainY, classes, 1e-3)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fitted softmax regression on %d rows: %d features, %d classes\n", trainRows, dims, classes)

	test := testRecord(mem, testX, testY)
	defer test.Release()
	confusion := eval.ConfusionMatrix(classes)
	metrics := []eval.Metric{
		eval.Accuracy(), eval.Precision(eval.Macro, classes), eval.Recall(eval.Macro, classes),
		eval.F1(eval.Macro, classes), eval.LogLoss(), confusion,
	}
	report, err := eval.Evaluate(ctx, model, dataset.FromRecords(test.Schema(), test), "label", metrics,
		predict.WithBatchSize(batchSize), predict.WithReplicas(2), predict.WithAllocator(mem))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "evaluated %d held-out rows in batches of %d (the last one %d rows + %d padding)\n",
		report.Rows, batchSize, testRows%batchSize, batchSize-testRows%batchSize)
	for _, m := range metrics[:5] {
		fmt.Fprintf(w, "  %-16s %.4f\n", m.Name(), report.Values[m.Name()])
	}
	fmt.Fprintf(w, "confusion matrix (rows: label, columns: prediction):\n%v\n", mat.Formatted(confusion.Matrix(), mat.Prefix(""), mat.Squeeze()))
	return nil
}

// testRecord puts the held-out rows in a record: label and features.
func testRecord(mem memory.Allocator, x *mat.Dense, labels []int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: tensor.Type(int(dims))},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	lb := b.Field(0).(*array.Int64Builder)
	fb := b.Field(1).(*array.FixedSizeListBuilder)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	for i, l := range labels {
		lb.Append(int64(l))
		fb.Append(true)
		for j := range dims {
			vb.Append(float32(x.At(i, j)))
		}
	}
	return b.NewRecordBatch()
}
