//go:build unix

package fileset_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/sink"
)

// BenchmarkReadS3VsLocal reads a 200,000-row id + float32[64] Parquet file
// (53 MB, row groups of 16,384) from local disk and from a local
// S3-compatible server (VersityGW on 127.0.0.1), in interleaved rounds,
// and reports both rates and their ratio (median of the rounds), with
// the CPU each read takes: the reader's, and the server's, which on this
// machine runs on the same cores. s3/local_bound is the ratio the S3 read
// would reach if all that CPU ran in parallel on two cores.
//
//	go test -run '^$' -bench ReadS3VsLocal -benchtime 1x ./dataset/fileset
func BenchmarkReadS3VsLocal(b *testing.B) {
	srv := s3test.Start(b)
	bucket := srv.Bucket(b, "bench")
	const rows = 200_000
	path := filepath.Join(bucket, "in.parquet")
	w, err := sink.Create(path, dataset.TensorSchema(64), sink.WithRowGroupRows(16_384))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), rows, 64, 16_384, 1).Records()); err != nil {
		b.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	type cost struct{ wall, cpu, server time.Duration }
	read := func(name string) cost {
		cpu0, server0, began := processCPU(), srv.CPU(), time.Now()
		ds, err := fileset.Read([]string{name}, fileset.WithReadRows(16_384))
		if err != nil {
			b.Fatal(err)
		}
		n, err := ds.Count()
		if err != nil || n != rows {
			b.Fatalf("%s: %d rows, %v", name, n, err)
		}
		return cost{time.Since(began), processCPU() - cpu0, srv.CPU() - server0}
	}
	var local, remote []cost
	for range b.N {
		for range 5 {
			local, remote = append(local, read(path)), append(remote, read(srv.URL("bench", "in.parquet")))
		}
	}
	med := func(v []cost, f func(cost) float64) float64 {
		s := make([]float64, len(v))
		for i, c := range v {
			s[i] = f(c)
		}
		slices.Sort(s)
		return s[len(s)/2]
	}
	ratios := make([]cost, len(local))
	for i := range local {
		ratios[i] = cost{wall: time.Duration(float64(time.Second) * local[i].wall.Seconds() / remote[i].wall.Seconds())}
	}
	wall := func(c cost) float64 { return c.wall.Seconds() }
	b.ReportMetric(rows/med(local, wall), "local_rows/s")
	b.ReportMetric(rows/med(remote, wall), "s3_rows/s")
	b.ReportMetric(med(ratios, wall), "s3/local")
	cpu := func(c cost) float64 { return float64(c.cpu.Milliseconds()) }
	server := func(c cost) float64 { return float64(c.server.Milliseconds()) }
	b.ReportMetric(med(local, cpu), "local_cpu_ms")
	b.ReportMetric(med(remote, cpu), "s3_cpu_ms")
	b.ReportMetric(med(remote, server), "server_cpu_ms")
	// All of the S3 read's CPU, the server's too, spread over two cores.
	bound := max(med(local, wall), (med(remote, cpu)+med(remote, server))/2/1000)
	b.ReportMetric(med(local, wall)/bound, "s3/local_bound")
	b.ReportMetric(float64(st.Size())/1e6, "file_MB")
}

// processCPU returns the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
