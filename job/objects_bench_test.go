//go:build unix

package job_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/job"
)

// BenchmarkJobS3VsLocal runs the same job, 200,000 rows of id + 64
// features in Parquet through an MLP 64-256-256-10, disk to disk and from
// a local S3 server (VersityGW on 127.0.0.1) to it, folder and file
// outputs, in interleaved rounds; it reports each rate and the S3 ÷ disk
// ratio (median of the rounds). The server runs on the same cores:
// s3/disk_bound is the ratio were all the CPU of the S3 run (the job's
// and the server's) spread over both.
//
//	go test -tags openblas -run '^$' -bench JobS3VsLocal -benchtime 1x ./job
func BenchmarkJobS3VsLocal(b *testing.B) {
	const rows, features = 200_000, 64
	mem := memory.NewGoAllocator()
	srv := s3test.Start(b)
	dir := srv.Bucket(b, "bench")
	input := filepath.Join(dir, "in.parquet")
	m := outputsInput(b, mem, input, rows, features)
	local := b.TempDir()
	// run returns the job's wall time, its process's CPU and the server's.
	run := func(in, out string) (wall, cpu, server float64) {
		cpu0, server0, began := processCPU(), srv.CPU(), time.Now()
		sum, err := job.Run(b.Context(), job.Config{Inputs: []string{in}, Output: out, Model: m, ModelID: "bench", InputSize: features,
			Keep: []string{"id"}, BatchSize: 256, Prefetch: -1, Overwrite: true, Allocator: mem})
		if err != nil || sum.Rows != rows {
			b.Fatalf("%s: %v", out, err)
		}
		return time.Since(began).Seconds(), (processCPU() - cpu0).Seconds(), (srv.CPU() - server0).Seconds()
	}
	for _, out := range []string{"preds/", "preds.parquet"} {
		b.Run(out[:5]+map[bool]string{true: "-folder", false: "-file"}[out == "preds/"], func(b *testing.B) {
			var disk, s3, ratio, bound, serverCPU []float64
			for range b.N {
				for range 3 {
					d, _, _ := run(input, local+"/"+out)
					s, cpu, server := run(srv.URL("bench", "in.parquet"), srv.URL("bench", out))
					disk, s3, ratio = append(disk, rows/d), append(s3, rows/s), append(ratio, d/s)
					// The ratio if the job's CPU and the server's, which share
					// this machine's two cores, ran side by side.
					bound, serverCPU = append(bound, d/max(d, (cpu+server)/2)), append(serverCPU, server)
				}
			}
			med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
			b.ReportMetric(med(disk), "disk_rows/s")
			b.ReportMetric(med(s3), "s3_rows/s")
			b.ReportMetric(med(ratio), "s3/disk")
			b.ReportMetric(med(bound), "s3/disk_bound")
			b.ReportMetric(med(serverCPU), "server_cpu_s")
		})
	}
	os.RemoveAll(local)
}

// processCPU returns the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
