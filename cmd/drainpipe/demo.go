package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
)

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 100_003, "rows of synthetic data")
	dir := fs.String("dir", "drainpipe-demo", "the folder for the data, the model and the predictions; kept, and reused by the next run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: drainpipe demo [flags]\n\nWrites synthetic Parquet files (an id and 64 float features) and an MLP\n64-256-256-10 into a folder, runs a full predict job on them, and prints\nthe commands to try next. A second run reuses the folder.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	const width, files = 64, 4
	modelPath := filepath.Join(*dir, "model.dpmlp")
	input := filepath.Join(*dir, "data-*.parquet")
	output := filepath.Join(*dir, "predictions.parquet")
	if n, err := dataset.FilesRows([]string{input}); err == nil && n == int64(*rows) {
		fmt.Fprintf(stdout, "demo folder: %s (reused)\n", *dir)
	} else {
		if err := writeDemo(*dir, *rows, width, files); err != nil {
			return err
		}
		os.Remove(output) // the predictions of other data
		fmt.Fprintf(stdout, "demo folder: %s\n  data-{0..%d}.parquet: %d rows, id + features<float32>[%d]\n  model.dpmlp: MLP 64-256-256-10\n", *dir, files-1, *rows, width)
	}
	predictCmdLine := fmt.Sprintf("drainpipe predict --model %s --input '%s' --output %s --batch-size 256 --keep id", modelPath, input, output)
	fmt.Fprintf(stdout, "running: %s --resume\n", predictCmdLine)

	m, err := loadModel(modelPath, "")
	if err != nil {
		return err
	}
	prog := newProgress(stderr)
	sum, err := job.Run(ctx, job.Config{
		Inputs: []string{input}, Output: output, Resume: true,
		Model: m.model, ModelID: m.id, InputSize: m.inputSize, Keep: []string{"id"}, BatchSize: 256, Prefetch: -1,
		Predict:  []predict.Option{predict.WithSessions(m.sessions)},
		Progress: prog.update, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	prog.finish()
	if err != nil {
		return err
	}
	printSummary(stdout, sum)

	out, err := dataset.Files([]string{output})
	if err != nil {
		return err
	}
	for rec, err := range out.Records() {
		if err != nil {
			return err
		}
		ids, classes := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		fmt.Fprintln(stdout, "first predictions (id -> class):")
		for i := range min(5, ids.Len()) {
			fmt.Fprintf(stdout, "  %d -> %d\n", ids.Value(i), classes.Value(i))
		}
		break
	}
	fmt.Fprintf(stdout, "next:\n  drainpipe inspect %s\n  %s --resume\n  drainpipe predict --model %s --input '%s' --output %s --keep id\n",
		output, predictCmdLine, modelPath, input, filepath.Join(*dir, "predictions")+string(filepath.Separator))
	return nil
}

// writeDemo writes the demo's data files and model into dir.
func writeDemo(dir string, rows, width, files int) error {
	mem := memory.DefaultAllocator
	all := dataset.UniformTensors(mem, rows, width, 8192, 1)
	per := (rows + files - 1) / files
	for f := range files {
		w, err := sink.Create(filepath.Join(dir, fmt.Sprintf("data-%d.parquet", f)), all.Schema(), sink.WithOverwrite(true))
		if err != nil {
			return err
		}
		part := dataset.Take(dataset.Skip(all, int64(f*per)), int64(per))
		if _, err := dataset.Copy(w, part.Records()); err != nil {
			w.Abort()
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
	}
	model, err := cpu.NewMLP([]int{width, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		return err
	}
	return model.SaveFile(filepath.Join(dir, "model.dpmlp"))
}
