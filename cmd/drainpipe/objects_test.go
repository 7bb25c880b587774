package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"

	"github.com/drainpipe/drainpipe/internal/testing/s3test"
)

// predict reads its inputs from an S3-compatible server by URL, glob and
// all, and writes the predictions it writes for the same files on local
// disk; inspect reads a URL; it writes to S3 as well, file and folder.
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
	if !sameTable(t, local, remote) {
		t.Fatal("the predictions of the S3 inputs differ from the local inputs'")
	}
	stdout, _, err = drainpipe("inspect", srv.URL("data", "in-1.parquet"))
	if err != nil || !strings.Contains(stdout, "rows: 1500") {
		t.Fatalf("inspect a URL: %v\n%s", err, stdout)
	}
	// S3 to S3: a file output, and a folder output read back as a dataset.
	for _, out := range []string{"out.parquet", "out/"} {
		stats := filepath.Join(dir, "stats.json")
		stdout, stderr, err = drainpipe("predict", "--model", model, "--input", srv.URL("data", "in-*.parquet"), "--output", srv.URL("data", out), "--keep", "id", "--quiet",
			"--stats-json", stats, "--overwrite")
		if err != nil || !strings.Contains(stdout, "rows=3000 ") {
			t.Fatalf("%s: %v\n%s%s", out, err, stdout, stderr)
		}
		if !sameTable(t, local, srv.URL("data", out)) {
			t.Fatalf("%s: the predictions written to S3 differ from the local job's", out)
		}
		// The statistics give each input object's requests and bytes: a
		// look, its tail, its one row group.
		var doc struct {
			Inputs map[string]struct{ Size, Requests, Bytes int64 } `json:"inputs"`
		}
		if data, err := os.ReadFile(stats); err != nil || json.Unmarshal(data, &doc) != nil {
			t.Fatalf("stats: %v", err)
		}
		for _, in := range []string{"in-0.parquet", "in-1.parquet"} {
			tr, ok := doc.Inputs[redactedURL(srv, "data", in)]
			// Every byte once, but the 4 of the leading magic, which no
			// reader needs.
			if !ok || tr.Requests != 3 || tr.Bytes < tr.Size-4 || tr.Bytes > tr.Size {
				t.Fatalf("stats of %s: %+v in %v", in, tr, doc.Inputs)
			}
		}
	}
	if _, err := os.Stat("s3:"); err == nil {
		t.Fatal("an output URL was written as a local path")
	}
}

// A job from S3 to S3, killed (kill -9) at random points and resumed each
// time, writes the objects an uninterrupted run writes, byte for byte: the
// killed job's lock is taken over with --break-lock, its parts kept.
func TestKilledS3JobResumesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CLI many times")
	}
	dir := fixture(t, 60_000, 16, 128, 128, 10)
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "kills")
	for _, name := range []string{"in-0.parquet", "in-1.parquet"} {
		if err := os.WriteFile(filepath.Join(bucket, name), arrowtest.ReadFile(t, filepath.Join(dir, name)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s3 := func(key string) output {
		o := output{path: srv.URL("kills", key), disk: filepath.Join(bucket, key), input: srv.URL("kills", "in-*.parquet"),
			resume: []string{"--resume", "--break-lock"}}
		o.parts = o.disk + ".parts"
		if strings.HasSuffix(key, "/") {
			o.disk += "/"
			o.parts = o.disk
		}
		return o
	}
	for _, outs := range [][2]output{{s3("ref.parquet"), s3("out.parquet")}, {s3("ref/"), s3("out/")}} {
		t.Run(filepath.Base(outs[1].disk), func(t *testing.T) { killAndResume(t, dir, outs[0], outs[1]) })
	}
	// No upload the kills cut short is left behind (S3 keeps, and bills,
	// an incomplete multipart upload until it is aborted).
	client := s3sdk.New(s3sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, "")})
	list, err := client.ListMultipartUploads(t.Context(), &s3sdk.ListMultipartUploadsInput{Bucket: aws.String("kills")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Uploads) > 0 {
		t.Fatalf("%d incomplete uploads left, the first to %s", len(list.Uploads), aws.ToString(list.Uploads[0].Key))
	}
}

// redactedURL is the URL of a key as the statistics name it: the query
// sorted, as net/url encodes it.
func redactedURL(srv *s3test.Server, bucket, key string) string {
	u, _ := url.Parse(srv.URL(bucket, key))
	u.RawQuery = u.Query().Encode()
	return u.String()
}

// sameTable reports whether two files hold the same table, whatever their
// division into records.
func sameTable(t *testing.T, a, b string) bool {
	t.Helper()
	ta := filetest.ReadWhole(t, memory.DefaultAllocator, a)
	defer ta.Release()
	tb := filetest.ReadWhole(t, memory.DefaultAllocator, b)
	defer tb.Release()
	return array.RecordEqual(ta, tb)
}

// A model is read by URL as inputs are (predict, eval and serve share
// its loading): predict over a model on S3 gives what the same model on
// disk gives, a missing one is named, and serve takes it as URL and as
// NAME=URL, a query's = signs left to the URL.
func TestModelFromS3(t *testing.T) {
	dir := fixture(t, 300, 8, 4)
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "models")
	if err := os.WriteFile(filepath.Join(bucket, "m.dpmlp"), arrowtest.ReadFile(t, filepath.Join(dir, "model.dpmlp")), 0o644); err != nil {
		t.Fatal(err)
	}
	url := srv.URL("models", "m.dpmlp")
	local, remote := filepath.Join(dir, "local.parquet"), filepath.Join(dir, "remote.parquet")
	for out, model := range map[string]string{local: filepath.Join(dir, "model.dpmlp"), remote: url} {
		if _, stderr, err := drainpipe("predict", "--model", model, "--input", filepath.Join(dir, "in-*.parquet"), "--output", out, "--keep", "id", "--quiet"); err != nil {
			t.Fatalf("--model %s: %v\n%s", model, err, stderr)
		}
	}
	if !bytes.Equal(arrowtest.ReadFile(t, local), arrowtest.ReadFile(t, remote)) {
		t.Fatal("the predictions of the model on S3 differ from the model on disk's")
	}
	if _, stderr, err := drainpipe("predict", "--model", srv.URL("models", "none.dpmlp"), "--input", filepath.Join(dir, "in-*.parquet"),
		"--output", filepath.Join(dir, "x.parquet"), "--quiet"); err == nil || !strings.Contains(stderr, "s3://models/none.dpmlp") {
		t.Fatalf("a missing model by URL: %v %s", err, stderr)
	}
	for arg, name := range map[string]string{url: "m", "other=" + url: "other"} {
		s := startServe(t, "--model", arg)
		resp, err := http.Get(s.http + "/v2/models/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("serve --model %s: model %q: %d\n%s", arg, name, resp.StatusCode, s.logText())
		}
	}
}
