// Command drainpipe-beam runs a drainpipe batch prediction job as an
// Apache Beam pipeline: on Prism, Beam's local runner, by default, or on
// Flink, Spark or Dataflow with Beam's usual flags.
//
//	drainpipe-beam --input 'data/*.parquet' --model model.dpmlp --output out/ --keep id
//	drainpipe-beam --runner=universal --endpoint=localhost:8099 ...   # a Flink job server
//	drainpipe-beam --runner=dataflow --project=P --region=R --staging_location=gs://... ...
//
// The output folder gets one Parquet file a shard (keys and predictions),
// then _manifest.json and _SUCCESS once every shard has committed.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	dpbeam "github.com/drainpipe/drainpipe/beam"
	"github.com/drainpipe/drainpipe/internal/cliflag"
)

func main() {
	var inputs, keep cliflag.List
	flag.Var(&inputs, "input", "input files or glob patterns (.parquet, .arrow, .arrows, .csv), as the workers see them; repeatable")
	model := flag.String("model", "", "the model file (.dpmlp), as the workers see it")
	loader := flag.String("loader", "", "a model loader registered in this binary (default: drainpipe MLP files)")
	output := flag.String("output", "", "the output folder")
	flag.Var(&keep, "keep", "input columns to write next to the predictions, such as keys; repeatable")
	featureCol := flag.String("feature-column", "", "the tensor column the model reads (default: the model's)")
	batch := flag.Int("batch-size", 256, "rows per device batch")
	rowsPerShard := flag.Int64("rows-per-shard", 1<<18, "rows a Parquet shard aims at: files of many row groups split into several shards")
	flag.Parse()
	beam.Init()
	if len(inputs) == 0 || *model == "" || *output == "" {
		log.Fatal("drainpipe-beam: --input, --model and --output are required")
	}

	p, s := beam.NewPipelineWithRoot()
	dpbeam.Predict(s, dpbeam.Config{Inputs: inputs, Model: *model, Loader: *loader, Output: *output,
		FeatureColumn: *featureCol, Keep: keep, BatchSize: *batch, RowsPerShard: *rowsPerShard})
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatalf("drainpipe-beam: %v", err)
	}
}
