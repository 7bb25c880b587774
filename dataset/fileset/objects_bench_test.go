package fileset_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/s3test"
	"github.com/drainpipe/drainpipe/sink"
)

// BenchmarkReadS3VsLocal reads a 200,000-row id + float32[64] Parquet file
// (64 MB, row groups of 16,384) from local disk and from a local
// S3-compatible server (VersityGW on 127.0.0.1), in interleaved rounds,
// and reports both rates and their ratio (median of the rounds).
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
	read := func(name string) float64 {
		began := time.Now()
		ds, err := fileset.Read([]string{name}, fileset.WithReadRows(16_384))
		if err != nil {
			b.Fatal(err)
		}
		n, err := ds.Count()
		if err != nil || n != rows {
			b.Fatalf("%s: %d rows, %v", name, n, err)
		}
		return rows / time.Since(began).Seconds()
	}
	var local, remote, ratios []float64
	for range b.N {
		for range 3 {
			l, r := read(path), read(srv.URL("bench", "in.parquet"))
			local, remote, ratios = append(local, l), append(remote, r), append(ratios, r/l)
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(local), "local_rows/s")
	b.ReportMetric(med(remote), "s3_rows/s")
	b.ReportMetric(med(ratios), "s3/local")
	b.ReportMetric(float64(st.Size())/1e6, "file_MB")
}
