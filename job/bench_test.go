package job_test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
)

// BenchmarkJob runs a Parquet-to-Parquet job of 100,000 rows with a small
// model, so the figures show what the job itself costs: reading, parts,
// the merge.
func BenchmarkJob(b *testing.B) {
	mem := memory.NewGoAllocator()
	input, _ := setup(b, mem, 100_000)
	m, err := cpu.NewMLP([]int{width, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for b.Loop() {
		cfg := config(mem, input, filepath.Join(dir, "out.parquet"), m)
		cfg.BatchSize, cfg.PartRows, cfg.ReadRows, cfg.Overwrite = 256, 1<<16, 1<<16, true
		if _, err := job.Run(b.Context(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// outputsInput writes rows of features to a Parquet file at path, in
// records of 4,096, and returns the MLP features-256-256-10 the output
// benchmarks run on it.
func outputsInput(b *testing.B, mem memory.Allocator, path string, rows, features int) *cpu.MLP {
	b.Helper()
	w, err := sink.Create(path, dataset.TensorSchema(features))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(mem, rows, features, 4096, 1).Records()); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{features, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkOutputs compares a job's two outputs with the same model fed by
// the same reader and writing nothing: 200,000 rows of 64 features in
// Parquet, MLP 64-256-256-10, batch 256. The write's cost is what the
// folder and file runs lose against "no-output".
//
//	go test -tags openblas -run '^$' -bench Outputs -benchtime 3x ./job
func BenchmarkOutputs(b *testing.B) {
	const rows, features = 200_000, 64
	mem := memory.NewGoAllocator()
	dir := b.TempDir()
	input := filepath.Join(dir, "in.parquet")
	m := outputsInput(b, mem, input, rows, features)
	cfg := func(out string) job.Config {
		return job.Config{Inputs: []string{input}, Output: out, Model: m, ModelID: "bench", InputSize: features,
			Keep: []string{"id"}, BatchSize: 256, Prefetch: -1, Overwrite: true, Allocator: mem}
	}
	b.Run("no-output", func(b *testing.B) {
		p, err := predict.New(m, predict.WithBatchSize(256), predict.WithPassthrough("id"), predict.WithPrefetch(1<<14/256+2))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			ds, err := fileset.Read([]string{input}, fileset.WithReadRows(1<<14))
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range p.All(b.Context(), ds) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	for _, out := range []string{"folder/", "out.parquet"} {
		b.Run(strings.TrimSuffix(out, "/"), func(b *testing.B) {
			for b.Loop() {
				if _, err := job.Run(b.Context(), cfg(dir+"/"+out)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rows*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
