package job_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
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
