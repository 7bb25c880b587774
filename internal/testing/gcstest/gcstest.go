// Package gcstest runs a real Google Cloud Storage emulator for tests:
// fake-gcs-server (github.com/fsouza/fake-gcs-server, BSD-2-Clause) on its
// filesystem backend, built from the Go module proxy once and kept in the
// user's cache folder, and started on 127.0.0.1 with a free port. The GCS
// client (and so gs:// URLs) finds it through STORAGE_EMULATOR_HOST.
package gcstest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"

	// gs:// for the tests that use the emulator.
	_ "github.com/drainpipe/drainpipe/storage/gcsdriver"
)

// Version is the fake-gcs-server release the tests run.
const Version = "v1.56.0"

// pkg is the emulator's command, as go install names it.
const pkg = "github.com/fsouza/fake-gcs-server"

// Build builds the emulator once a machine, for testbin.Prepare; Start
// builds it too.
func Build(ctx context.Context) error {
	_, err := testbin.Binary(ctx, pkg, Version)
	return err
}

// Server is a running emulator.
type Server struct {
	// Endpoint is its address, http://127.0.0.1:PORT.
	Endpoint string
	// Root is the folder its buckets are in: an object uploaded to
	// bucket/key is the file Root/bucket/key.
	Root string
}

// Start builds (once) and starts an emulator for the test, which stops it
// when it ends, and points the GCS client at it (STORAGE_EMULATOR_HOST).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Binary(t.Context(), pkg, Version)
	if err != nil {
		t.Fatalf("gcstest: %v", err)
	}
	root := t.TempDir()
	addr, _ := testbin.Start(t, bin, func(addr string) []string {
		_, port, _ := net.SplitHostPort(addr)
		return []string{"-scheme", "http", "-host", "127.0.0.1", "-port", port, "-backend", "filesystem",
			"-filesystem-root", root, "-public-host", addr, "-log-level", "error"}
	})
	t.Setenv("STORAGE_EMULATOR_HOST", addr)
	return &Server{Endpoint: "http://" + addr, Root: root}
}

// Bucket makes a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	s.do(t, http.MethodPost, "/storage/v1/b?project=test", fmt.Sprintf(`{"name":%q}`, name))
}

// Put uploads data as bucket/key.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	s.do(t, http.MethodPost, "/upload/storage/v1/b/"+bucket+"/o?uploadType=media&name="+url.QueryEscape(key), string(data))
}

func (s *Server) do(t testing.TB, method, path, body string) {
	t.Helper()
	req, err := http.NewRequest(method, s.Endpoint+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("gcstest: %s %s: %s: %s", method, path, resp.Status, msg)
	}
}

// URL returns the gs:// URL of key in bucket.
func (s *Server) URL(bucket, key string) string { return "gs://" + bucket + "/" + key }
