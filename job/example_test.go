package job_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/job"
)

// An evaluation over a labelled CSV file whose fourth row has no label:
// with SetAside it goes to its own file, with its file row and reason,
// and the metrics count the other rows.
func ExampleEach() {
	dir, err := os.MkdirTemp("", "drainpipe-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	input := filepath.Join(dir, "test.csv")
	data := "x,y,label\n2,1,0\n0,3,1\n1,2,1\n5,4,\n3,2,1\n"
	if err := os.WriteFile(input, []byte(data), 0o644); err != nil {
		panic(err)
	}
	model := cpu.NewSoftmaxRegression(2, 2)
	model.Layers[0].Weights = []float32{1, 0, 0, 1} // class = the larger feature

	ev, err := eval.NewEvaluation("label", []eval.Metric{eval.Accuracy()})
	if err != nil {
		panic(err)
	}
	sum, err := job.Each(context.Background(), job.Config{
		Inputs: []string{input}, Model: model, ModelID: "example", InputSize: 2,
		FeatureColumn: "features", Gather: []string{"x", "y"}, Label: "label",
		BatchSize: 2, SetAside: filepath.Join(dir, "aside.parquet"),
	}, ev.Update)
	if err != nil {
		panic(err)
	}
	report := ev.Report()
	fmt.Printf("rows=%d set_aside=%d accuracy=%.2f\n", report.Rows, sum.RowsSetAside, report.Values["accuracy"])
	// Output:
	// rows=4 set_aside=1 accuracy=0.75
}
