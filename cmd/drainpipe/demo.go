package main

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/atomicfile"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
)

const demoLong = `Writes synthetic Parquet files (an id and 64 float features) and an MLP
64-256-256-10 into a folder, runs a full predict job on them, writes
labelled CSV files to fit and evaluate a model on, and prints the
commands to try next. A second run reuses the folder.`

func demoCommand() *cobra.Command {
	c := &cobra.Command{Use: "demo", Short: "A full job on synthetic data, and the commands to try next", Long: demoLong, Example: "", Args: noArgs("")}
	fs := c.Flags()
	rows := fs.Int("rows", 100_003, "rows of synthetic data")
	dir := fs.String("dir", "drainpipe-demo", "the folder for the data, the model and the predictions; kept, and reused by the next run")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		const width, files = 64, 4
		modelPath := filepath.Join(*dir, "model.dpmlp")
		input := filepath.Join(*dir, "data-*.parquet")
		output := filepath.Join(*dir, "predictions.parquet")
		if n, err := fileset.Rows([]string{input}); err == nil && n == int64(*rows) {
			fmt.Fprintf(stdout, "demo folder: %s (reused)\n", *dir)
		} else {
			if err := writeDemo(*dir, *rows, width, files); err != nil {
				return err
			}
			os.Remove(output) // the predictions of other data
			fmt.Fprintf(stdout, "demo folder: %s\n  data-{0..%d}.parquet: %d rows, id + features<float32>[%d]\n  model.dpmlp: MLP 64-256-256-10\n", *dir, files-1, *rows, width)
		}
		train, test := filepath.Join(*dir, "train.csv"), filepath.Join(*dir, "test.csv")
		if !exists(train) || !exists(test) {
			if err := writeLabelled(train, test, 3000, 1000); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  train.csv, test.csv: 3000 and 1000 labelled rows, f0..f3 + label (3 classes)\n")
		}
		predictCmdLine := fmt.Sprintf("drainpipe predict --model %s --input '%s' --output %s --batch-size 256 --keep id", modelPath, input, output)
		fmt.Fprintf(stdout, "running: %s --resume\n", predictCmdLine)

		m, err := loadModel(modelPath, "", nil)
		if err != nil {
			return err
		}
		prog := newProgress(stderr, "predicting")
		sum, err := job.Run(ctx, job.Config{
			Inputs: []string{input}, Output: output, Resume: true,
			Model: m.model, ModelID: m.id, InputSize: m.inputSize, Keep: []string{"id"}, BatchSize: 256, Prefetch: -1,
			Predict:  []predict.Option{predict.WithGroups(m.sessions)},
			Progress: prog.update, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		prog.finish()
		if err != nil {
			return err
		}
		printSummary(stdout, sum)

		out, err := fileset.Read([]string{output})
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
		fitted := filepath.Join(*dir, "fitted.dpmlp")
		fmt.Fprintf(stdout, "next:\n  drainpipe inspect %s\n  %s --resume\n  drainpipe predict --model %s --input '%s' --output %s --keep id\n",
			output, predictCmdLine, modelPath, input, filepath.Join(*dir, "predictions")+string(filepath.Separator))
		fmt.Fprintf(stdout, "  drainpipe fit --input %s --label label --features 'f*' --output %s\n  drainpipe eval --model %s --input %s --label label --features 'f*' --plot %s\n",
			train, fitted, fitted, test, filepath.Join(*dir, "plots"))
		return nil
	}
	return c
}

// writeLabelled writes the demo's labelled CSV files: four features and a
// class 0..2, the largest of three fixed linear scores of the features,
// with one label in twenty drawn at random (so no model scores 1.0).
func writeLabelled(train, test string, trainRows, testRows int) error {
	r := rand.New(rand.NewPCG(3, 3))
	var w [3][4]float64
	for c := range w {
		for j := range w[c] {
			w[c][j] = r.NormFloat64()
		}
	}
	write := func(path string, rows int) error {
		var b strings.Builder
		b.WriteString("f0,f1,f2,f3,label\n")
		for range rows {
			var f [4]float64
			for j := range f {
				f[j] = r.Float64()*2 - 1
			}
			best, top := 0, math.Inf(-1)
			for c := range w {
				s := 0.0
				for j := range f {
					s += w[c][j] * f[j]
				}
				if s > top {
					best, top = c, s
				}
			}
			if r.IntN(20) == 0 {
				best = r.IntN(3)
			}
			fmt.Fprintf(&b, "%.4f,%.4f,%.4f,%.4f,%d\n", f[0], f[1], f[2], f[3], best)
		}
		return atomicfile.WriteFile(path, []byte(b.String()))
	}
	if err := write(train, trainRows); err != nil {
		return err
	}
	return write(test, testRows)
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

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
