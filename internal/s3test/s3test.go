// Package s3test runs real S3-compatible servers for tests, each built
// from the Go module proxy once and kept in the user's cache folder, and
// started on 127.0.0.1 with a free port:
//   - VersityGW (github.com/versity/versitygw, Apache-2.0) on its POSIX
//     backend, in a temporary root folder: it honours conditional
//     requests;
//   - gofakes3 (github.com/johannesboyne/gofakes3, MIT) in memory: it
//     ignores If-Match on reads and checks no signature, as some stores
//     and caches in front of them do.
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

// GoFakeS3Version is the gofakes3 release the tests run.
const GoFakeS3Version = "v1.2.0"

// StartGoFakeS3 builds (once) and starts a gofakes3 server in memory for
// the test, which stops it when it ends. It makes a bucket on its first
// use, and sets the AWS SDK's credential and region variables (it checks
// none). Its Root is empty: its objects are reached through S3 alone.
func StartGoFakeS3(t testing.TB) *Server {
	t.Helper()
	bin, err := testbin.Binary("github.com/johannesboyne/gofakes3/cmd/gofakes3", GoFakeS3Version)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	addr, proc := testbin.Start(t, bin, func(addr string) []string {
		return []string{"-backend", "memory", "-autobucket", "-quiet", "-host", addr}
	})
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return &Server{Endpoint: "http://" + addr, proc: proc}
}

// Bucket makes a bucket and returns its folder ("" on a server without
// one, which makes a bucket on its first use).
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	if s.Root == "" {
		return ""
	}
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
