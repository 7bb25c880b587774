// Command objectstore runs a batch job whose input and output live in an
// S3-compatible object store. The library imports no cloud driver, as
// database/sql imports none: the application picks the stores it reaches
// with a blank import of their drivers (storage/s3driver here;
// storage/gcsdriver and storage/azuredriver for gs:// and azblob://), and
// links only those SDKs.
//
//	go run ./examples/objectstore --input 's3://bucket/in.parquet?endpoint=http://127.0.0.1:9000&use_path_style=true' \
//	    --output 's3://bucket/preds/?endpoint=http://127.0.0.1:9000&use_path_style=true'
//
// Credentials come from the environment, as the AWS SDK reads them
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). The example
// first writes 10,000 rows of 16 random features to --input, then predicts
// them with a small MLP into --output: a folder of parts, exactly once,
// resumable, as on local disk.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"

	// The S3 driver: without it an s3:// URL is an error naming the
	// missing driver.
	_ "github.com/drainpipe/drainpipe/storage/s3driver"
)

const (
	rows  = 10_000
	width = 16
)

func main() {
	input := flag.String("input", "", "the s3:// URL to write the example's input to and read it from")
	output := flag.String("output", "", "the s3:// URL of the output: a folder (a trailing /) or a file")
	flag.Parse()
	if *input == "" || *output == "" {
		log.Fatal("--input and --output are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *input, *output); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, input, output string) error {
	// The input, written to the store as any Parquet writer would.
	store := storage.NewOpener()
	defer store.Close()
	in, err := sink.Create(input, dataset.TensorSchema(width), sink.WithOpener(store), sink.WithOverwrite(true))
	if err != nil {
		return err
	}
	if _, err := dataset.Copy(in, dataset.UniformTensors(memory.DefaultAllocator, rows, width, 1000, 1).Records()); err != nil {
		in.Abort()
		return err
	}
	if err := in.Commit(); err != nil {
		return err
	}

	model, err := cpu.NewMLP([]int{width, 32, 4}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return err
	}
	sum, err := job.Run(ctx, job.Config{
		Inputs: []string{input}, Output: output,
		Model: model, ModelID: "example", InputSize: width,
		Keep: []string{"id"}, BatchSize: 256, Overwrite: true,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s: rows=%d parts=%d\n", sum.Output, sum.Rows, sum.Parts)
	for url, t := range sum.Inputs {
		fmt.Fprintf(w, "read %s: %d requests, %d bytes\n", url, t.Requests, t.Bytes)
	}
	return nil
}
