//go:build onnx

// Command onnx runs an ONNX model (an MLP 64-256-256-10 exported with
// onnx.helper, in device/onnx/testdata) over 1,000 synthetic rows through the
// pipeline: fixed-size batches, a padded tail, two replicas each with its own
// ONNX Runtime session, and predictions streamed back in order.
//
//	scripts/fetch-onnxruntime.sh
//	go run -tags onnx ./examples/onnx
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/predict"
)

func main() {
	if err := run(context.Background(), os.Stdout, memory.DefaultAllocator); err != nil {
		fmt.Fprintln(os.Stderr, "onnx:", err)
		os.Exit(1)
	}
}

// modelPath finds the test model next to this file's package.
func modelPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "device", "onnx", "testdata", "mlp.onnx")
}

func run(ctx context.Context, w io.Writer, mem memory.Allocator) error {
	model, err := onnx.Open(modelPath(), onnx.WithIntraOpThreads(1))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "model: inputs %v, outputs %v\n", model.Inputs(), model.Outputs())
	var stats predict.Stats
	p, err := predict.New(model, predict.WithBatchSize(64), predict.WithReplicas(2),
		predict.WithPassthrough("id"), predict.WithAllocator(mem),
		predict.WithStats(func(s predict.Stats) { stats = s }))
	if err != nil {
		return err
	}
	counts := make([]int, 10)
	for r := range p.Predict(ctx, dataset.UniformTensors(mem, 1000, 64, 256, 1)) {
		if r.Err != nil {
			return r.Err
		}
		class := r.Record.Column(2).(*array.Int64)
		for i := range class.Len() {
			counts[class.Value(i)]++
		}
		r.Record.Release()
	}
	fmt.Fprintf(w, "predicted classes: %v\n", counts)
	fmt.Fprintf(w, "rows=%d batches=%d padded=%d\n", stats.Rows, stats.Batches, stats.PaddedRows)
	return nil
}
