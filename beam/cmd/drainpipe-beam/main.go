// Command drainpipe-beam runs a drainpipe batch prediction job as an
// Apache Beam pipeline: on Prism, Beam's local runner, by default, or on
// Flink, Spark or Dataflow with Beam's usual flags.
//
//	drainpipe-beam --input 'data/*.parquet' --model model.dpmlp --output out/ --keep id
//	drainpipe-beam --runner=universal --endpoint=localhost:8099 ...   # a Flink job server
//	drainpipe-beam --runner=dataflow --project=P --region=R --staging_location=gs://... ...
//
// The output folder gets one Parquet file a unit of work (keys and
// predictions), then _manifest.json and _SUCCESS once every unit has
// committed. A rerun of the same job over the folder, killed or not, with
// any parallelism, writes only the units not committed yet.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	dpbeam "github.com/drainpipe/drainpipe/beam"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/internal/cloudenv"
	"github.com/drainpipe/drainpipe/storage"

	// The object stores the pipeline reads and writes (storage imports none).
	_ "github.com/drainpipe/drainpipe/storage/azuredriver"
	_ "github.com/drainpipe/drainpipe/storage/gcsdriver"
	_ "github.com/drainpipe/drainpipe/storage/s3driver"
)

func main() {
	cloudenv.Defaults()
	// Beam registers its runners' flags (dozens) on the same flag set;
	// --help shows this command's, and names the runner flags that matter.
	ours := flag.NewFlagSet("drainpipe-beam", flag.ContinueOnError)
	var inputs, keep, features cliflag.List
	ours.Var(&inputs, "input", "input files, globs or folders, as the workers see them: paths, or URLs (s3://, gs://, azblob://); repeatable")
	model := ours.String("model", "", "the model file (.dpmlp), as the workers see it: a path or URL")
	loader := ours.String("loader", "", "a model loader registered in this binary (default: drainpipe MLP files)")
	output := ours.String("output", "", "the output folder: a path or URL")
	ours.Var(&keep, "keep", "input columns to write next to the predictions, such as keys; repeatable")
	ours.Var(&features, "features", "gather the scalar columns matching these patterns (such as 'f*') into the feature tensor")
	featureCol := ours.String("feature-column", "", "the tensor column the model reads (default: the model's)")
	batch := ours.Int("batch-size", 256, "rows per device batch")
	partRows := ours.Int("part-rows", 1<<18, "rows a unit of work aims at (whole row groups of one file): the units, and the output's files, depend on the inputs and this alone; a rerun resumes them")
	setAside := ours.String("set-aside", "", "a folder (path or URL) where each shard writes the rows it cannot predict (null or ragged features, values that do not parse, rows the model fails on) with their keys, source file, file row and reason, and goes on (default: such a row fails its shard)")
	readRows := ours.Int("read-rows", 1<<14, "rows per file read (Parquet batch, CSV chunk)")
	csvSample := ours.Int("csv-sample", 10_000, "rows of each CSV input its column types are inferred from")
	overwrite := ours.Bool("overwrite", false, "replace another job's output in --output (other inputs, input versions, model or settings); a rerun of the same job resumes without it")
	quiet := ours.Bool("quiet", false, "log warnings and errors only (the runner's and the shards' progress lines are INFO)")
	var maxMemory cliflag.Bytes
	ours.Var(&maxMemory, "max-memory", "the most memory the reader of one input file may hold, such as 4GiB or 512MiB (default: 2GiB plus 16 times the file's size)")
	ours.VisitAll(func(f *flag.Flag) { flag.Var(f.Value, f.Name, f.Usage) })
	flag.Usage = func() {
		w := flag.CommandLine.Output()
		fmt.Fprintf(w, "usage: drainpipe-beam --input FILES --model M --output DIR [flags] [Beam runner flags]\n\n")
		ours.SetOutput(w)
		ours.PrintDefaults()
		fmt.Fprintf(w, "\nBeam runner flags: --runner (prism, universal, dataflow, flink), --endpoint (a job server),\n"+
			"--project, --region, --staging_location, --worker_binary, --environment_type; Beam defines the rest.\n")
	}
	flag.Parse()
	beam.Init()
	if *quiet {
		// Prism and the shards log through slog's default logger (which
		// beam.Init sets).
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	if len(inputs) == 0 || *model == "" || *output == "" {
		fmt.Fprintln(os.Stderr, "drainpipe-beam: --input, --model and --output are required")
		os.Exit(2)
	}
	if *readRows < 1 {
		fmt.Fprintf(os.Stderr, "drainpipe-beam: --read-rows %d: want 1 or more\n", *readRows)
		os.Exit(2)
	}
	if err := preflight(inputs); err != nil {
		fmt.Fprintln(os.Stderr, "drainpipe-beam:", err)
		os.Exit(1)
	}
	p, s := beam.NewPipelineWithRoot()
	dpbeam.Predict(s, dpbeam.Config{Inputs: inputs, Model: *model, Loader: *loader, Output: *output,
		FeatureColumn: *featureCol, Features: features, Keep: keep, BatchSize: *batch, PartRows: *partRows,
		SetAside: *setAside, Overwrite: *overwrite, ReadRows: *readRows, CSVSample: *csvSample, MaxMemory: int64(maxMemory)})
	if err := beamx.Run(context.Background(), p); err != nil {
		fmt.Fprintln(os.Stderr, "drainpipe-beam:", cause(err))
		os.Exit(1)
	}
}

// preflight lists the inputs here, before a pipeline starts, when this
// machine sees them as the workers do (URLs; local paths it can list): an
// input that matches nothing is one line now, not a failed bundle later.
func preflight(inputs []string) error {
	runner := ""
	if f := flag.Lookup("runner"); f != nil {
		runner = f.Value.String()
	}
	local := runner == "" || runner == "prism" || runner == "direct" // the workers are this machine
	for _, in := range inputs {
		if !storage.IsURL(in) && !local {
			if matches, _ := fileset.Expand([]string{in}); len(matches) == 0 {
				continue // perhaps a path only the workers see
			}
		}
		matches, err := fileset.ExpandContext(context.Background(), []string{in})
		if err != nil {
			return err
		}
		if len(matches) == 0 {
			return fmt.Errorf("--input %s matches no data file", in)
		}
	}
	return nil
}

// cause returns the error a runner's error wraps in its plan and stack:
// its last line, what the failing step itself said.
func cause(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
