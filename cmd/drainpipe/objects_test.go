package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/internal/s3test"
)

// predict reads its inputs from an S3-compatible server by URL, glob and
// all, and writes the predictions it writes for the same files on local
// disk; inspect reads a URL; an output URL is refused (outputs on object
// storage are not written yet).
func TestPredictFromS3(t *testing.T) {
	dir := fixture(t, 3000, 8, 4)
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "data")
	for _, name := range []string{"in-0.parquet", "in-1.parquet"} {
		if err := os.WriteFile(filepath.Join(bucket, name), arrowtest.ReadFile(t, filepath.Join(dir, name)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	model := filepath.Join(dir, "model.dpmlp")
	local, remote := filepath.Join(dir, "local.parquet"), filepath.Join(dir, "remote.parquet")
	if _, stderr, err := drainpipe("predict", "--model", model, "--input", filepath.Join(dir, "in-*.parquet"), "--output", local, "--keep", "id", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	stdout, stderr, err := drainpipe("predict", "--model", model, "--input", srv.URL("data", "in-*.parquet"), "--output", remote, "--keep", "id", "--quiet")
	if err != nil || !strings.Contains(stdout, "rows=3000 ") {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	// The same predictions; the files differ only in the job's
	// fingerprint, which names the inputs.
	if a, b := table(t, local), table(t, remote); !array.RecordEqual(a, b) {
		t.Fatal("the predictions of the S3 inputs differ from the local inputs'")
	}
	stdout, _, err = drainpipe("inspect", srv.URL("data", "in-1.parquet"))
	if err != nil || !strings.Contains(stdout, "rows: 1500") {
		t.Fatalf("inspect a URL: %v\n%s", err, stdout)
	}
	_, stderr, err = drainpipe("predict", "--model", model, "--input", srv.URL("data", "in-*.parquet"), "--output", srv.URL("data", "out.parquet"), "--quiet")
	if err == nil || !strings.Contains(stderr, "not written yet") {
		t.Fatalf("an output URL: %v\n%s", err, stderr)
	}
	if _, err := os.Stat("s3:"); err == nil {
		t.Fatal("an output URL was written as a local path")
	}
}

// table reads a file whole into one record.
func table(t *testing.T, path string) arrow.RecordBatch {
	t.Helper()
	ds, err := fileset.Read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	whole, err := dataset.Concat(memory.DefaultAllocator, ds.Schema(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	t.Cleanup(whole.Release)
	return whole
}
