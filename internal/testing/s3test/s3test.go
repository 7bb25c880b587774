// Package s3test runs real S3-compatible servers for tests, each built
// from the Go module proxy once a machine and kept in the user's cache
// folder, and started on 127.0.0.1 with a free port:
//   - VersityGW (github.com/versity/versitygw, Apache-2.0) on its POSIX
//     backend, in a temporary root folder: it honours the conditions the
//     project relies on — If-None-Match: * on a PUT (a unit's commit),
//     If-Match on a GET (a pinned read) and on a DELETE — and refuses a
//     wrong secret as AccessDenied. A minute to build.
//   - gofakes3 (github.com/johannesboyne/gofakes3, MIT) in memory: it
//     ignores If-None-Match on a PUT and If-Match on reads and deletes,
//     and checks no signature, as some stores and caches in front of
//     them do. Seconds to build.
//   - MinIO (github.com/minio/minio, AGPL-3.0, run as a separate program,
//     never linked) on one drive in a temporary folder: the most deployed
//     S3-compatible server; it honours If-None-Match on a PUT and If-Match
//     on a GET, ignores If-Match on a DELETE, and refuses a wrong secret
//     as SignatureDoesNotMatch. Several minutes to build, so the core's
//     tests, which go test ./... runs on a new machine within its
//     timeout, test conditions on VersityGW; the Beam module's kill test
//     runs on MinIO.
package s3test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"

	// s3:// for the tests that use the server.
	_ "github.com/drainpipe/drainpipe/storage/s3driver"
)

// Version is the VersityGW release the tests run.
const Version = "v1.8.0"

// Credentials of the server's root account, which Start puts in the
// environment as the AWS SDK's standard variables.
const (
	AccessKey = "drainpipe-test"
	SecretKey = "drainpipe-test-secret"
)

// The servers' commands, as go install names them.
const (
	versityGW = "github.com/versity/versitygw/cmd/versitygw"
	goFakeS3  = "github.com/johannesboyne/gofakes3/cmd/gofakes3"
	minIO     = "github.com/minio/minio"
)

// BuildVersityGW, BuildGoFakeS3 and BuildMinIO build a server once a
// machine, for testbin.Prepare; the Start functions build it too.
func BuildVersityGW(ctx context.Context) error { return build(ctx, versityGW, Version) }

// BuildGoFakeS3 builds gofakes3 (see BuildVersityGW).
func BuildGoFakeS3(ctx context.Context) error { return build(ctx, goFakeS3, GoFakeS3Version) }

// BuildMinIO builds MinIO (see BuildVersityGW).
func BuildMinIO(ctx context.Context) error { return build(ctx, minIO, MinIOVersion) }

func build(ctx context.Context, pkg, version string) error {
	_, err := testbin.Binary(ctx, pkg, version)
	return err
}

// Server is a running S3 server.
type Server struct {
	// Endpoint is its address, http://127.0.0.1:PORT.
	Endpoint string
	// Root is the folder its buckets are in: a bucket is a folder, an
	// object a file below it.
	Root string
	proc *os.Process
	// makeBucket makes a bucket through S3 on a server whose buckets are
	// not plain folders (MinIO).
	makeBucket func(t testbin.T, name string)
}

// CPU returns the CPU time the server has used so far (Linux).
func (s *Server) CPU() time.Duration { return testbin.CPU(s.proc) }

// Start builds (once) and starts a server for the test, which stops it
// when it ends, and sets the AWS SDK's credential and region variables.
func Start(t testbin.T) *Server {
	t.Helper()
	root, meta := t.TempDir(), t.TempDir()
	srv := start(t, versityGW, Version, func(addr string) []string {
		return []string{"--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet", "posix", "--sidecar", meta, root}
	})
	srv.Root = root
	return srv
}

// start builds (once) and starts the server pkg@version, given its
// arguments for an address, until the test ends, and sets the AWS SDK's
// credential and region variables for it.
func start(t testbin.T, pkg, version string, args func(addr string) []string) *Server {
	t.Helper()
	bin, err := testbin.Binary(t.Context(), pkg, version)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	addr, proc := testbin.Start(t, bin, args)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return &Server{Endpoint: "http://" + addr, proc: proc}
}

// GoFakeS3Version is the gofakes3 release the tests run.
const GoFakeS3Version = "v1.2.0"

// StartGoFakeS3 builds (once) and starts a gofakes3 server in memory for
// the test, which stops it when it ends. It makes a bucket on its first
// use, and sets the AWS SDK's credential and region variables (it checks
// none). Its Root is empty: its objects are reached through S3 alone.
func StartGoFakeS3(t testbin.T) *Server {
	t.Helper()
	return start(t, goFakeS3, GoFakeS3Version, func(addr string) []string {
		return []string{"-backend", "memory", "-autobucket", "-quiet", "-host", addr}
	})
}

// MinIOVersion is the MinIO commit the tests run (MinIO tags its
// releases by date, not as Go module versions).
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// StartMinIO builds (once: a few minutes) and starts a MinIO server on
// one drive in a temporary folder for the test, which stops it when it
// ends, and sets the AWS SDK's credential and region variables. Its
// buckets are made through S3 (Bucket); Root is empty.
func StartMinIO(t testbin.T) *Server {
	t.Helper()
	t.Setenv("MINIO_ROOT_USER", AccessKey)
	t.Setenv("MINIO_ROOT_PASSWORD", SecretKey)
	t.Setenv("MINIO_BROWSER", "off")
	t.Setenv("MINIO_UPDATE", "off")
	data := t.TempDir()
	srv := start(t, minIO, MinIOVersion, func(addr string) []string {
		return []string{"server", "--address", addr, "--console-address", "127.0.0.1:0", "--quiet", data}
	})
	srv.makeBucket = func(t testbin.T, name string) {
		t.Helper()
		client := srv.Client()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("s3test: make bucket %s on MinIO: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond) // still starting
		}
	}
	return srv
}

// Bucket makes a bucket and returns its folder ("" on a server whose
// buckets are not folders, or that makes a bucket on its first use).
func (s *Server) Bucket(t testbin.T, name string) string {
	t.Helper()
	if s.makeBucket != nil {
		s.makeBucket(t, name)
		return ""
	}
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

// Client returns an S3 client of the server, as its root account.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// Uploads returns the keys of bucket with an incomplete multipart upload,
// of those keys given (MinIO lists an object's own only; an empty prefix
// lists the bucket's elsewhere).
func (s *Server) Uploads(t testbin.T, bucket string, keys ...string) []string {
	t.Helper()
	var left []string
	for _, key := range keys {
		list, err := s.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(key)})
		if err != nil && strings.Contains(err.Error(), "NoSuchUpload") {
			continue // gofakes3's answer for none
		}
		if err != nil {
			t.Fatalf("s3test: list uploads: %v", err)
		}
		for _, u := range list.Uploads {
			left = append(left, aws.ToString(u.Key))
		}
	}
	return left
}
