// Package s3test runs a real S3-compatible server for tests: VersityGW
// (github.com/versity/versitygw, Apache-2.0) on its POSIX backend, built
// from the Go module proxy once and kept in the user's cache folder, and
// started on 127.0.0.1 with a free port and a temporary root folder.
package s3test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/internal/testbin"
)

// Version is the VersityGW release the tests run.
const Version = "v1.8.0"

// Credentials of the server's root account, which Start puts in the
// environment as the AWS SDK's standard variables.
const (
	AccessKey = "drainpipe-test"
	SecretKey = "drainpipe-test-secret"
)

// Server is a running S3 server.
type Server struct {
	// Endpoint is its address, http://127.0.0.1:PORT.
	Endpoint string
	// Root is the folder its buckets are in: a bucket is a folder, an
	// object a file below it.
	Root string
	proc *os.Process
}

// CPU returns the CPU time the server has used so far (Linux).
func (s *Server) CPU() time.Duration { return testbin.CPU(s.proc) }

// Start builds (once) and starts a server for the test, which stops it
// when it ends, and sets the AWS SDK's credential and region variables.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Binary("github.com/versity/versitygw/cmd/versitygw", Version)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	root, meta := t.TempDir(), t.TempDir()
	addr, proc := testbin.Start(t, bin, func(addr string) []string {
		return []string{"--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet", "posix", "--sidecar", meta, root}
	})
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return &Server{Endpoint: "http://" + addr, Root: root, proc: proc}
}

// Bucket makes a bucket and returns its folder.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(s.Root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// URL returns the s3:// URL of key in bucket on this server.
func (s *Server) URL(bucket, key string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&use_path_style=true&region=us-east-1", bucket, key, s.Endpoint)
}
