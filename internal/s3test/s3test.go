// Package s3test runs a real S3-compatible server for tests: VersityGW
// (github.com/versity/versitygw, Apache-2.0) on its POSIX backend, built
// from the Go module proxy once and kept in the user's cache folder, and
// started on 127.0.0.1 with a free port and a temporary root folder.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
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
}

// Start builds (once) and starts a server for the test, which stops it
// when it ends, and sets the AWS SDK's credential and region variables.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("s3test: build versitygw %s: %v", Version, err)
	}
	root, meta := t.TempDir(), t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet",
		"posix", "--sidecar", meta, root)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	if err := waitListening(addr, 20*time.Second); err != nil {
		t.Fatalf("s3test: versitygw did not start: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return &Server{Endpoint: "http://" + addr, Root: root}
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

// binary returns the path of the versitygw binary, building it into the
// user's cache folder if it is not there yet.
func binary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "drainpipe-test", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Built into a folder of its own, then renamed: packages whose tests
	// build it at once each get a whole binary.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "github.com/versity/versitygw/cmd/versitygw@"+Version)
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(bin); serr != nil {
			return "", err
		}
	}
	return bin, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
