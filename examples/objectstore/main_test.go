package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example against a real S3 server on loopback (VersityGW): its
// input written and read back by URL, every row predicted once into a
// folder of parts on the store.
func TestRunOnS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "example")
	var out bytes.Buffer
	if err := run(t.Context(), &out, srv.URL("example", "in.parquet"), srv.URL("example", "preds/")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "rows=10000 ") {
		t.Fatalf("output %q", out.String())
	}
	ds, err := fileset.Read([]string{srv.URL("example", "preds/")})
	if err != nil {
		t.Fatal(err)
	}
	n, err := ds.Count()
	if err != nil || n != 10000 {
		t.Fatalf("the output folder reads %d rows: %v", n, err)
	}
}
