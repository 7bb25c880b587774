package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/drainpipe/drainpipe/internal/testing/aztest"
	"github.com/drainpipe/drainpipe/internal/testing/gcstest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/storage"
)

// A read through a server that refuses (503 SlowDown) or cuts responses
// mid-body still returns every byte as stored: the SDK retries refusals,
// and a cut body is asked for again from where it stopped. A server that
// never answers gives up with an error naming the object.
func TestReadSurvivesFaults(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "faults")
	data := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(bucket, "blob.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := srv.Proxy(t)
	url := proxy.URL("faults", "blob.bin")

	o := storage.NewOpener()
	defer o.Close()
	ctx := context.Background()
	f, err := o.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name        string
		refuse, cut int
	}{{"clean", 0, 0}, {"two refusals", 2, 0}, {"two cuts", 0, 2}} {
		proxy.Lock()
		proxy.RefuseGets, proxy.CutGets = c.refuse, c.cut
		proxy.Unlock()
		got := make([]byte, 1<<20)
		if n, err := f.ReadAt(got, 12345); err != nil || n != len(got) || !bytes.Equal(got, data[12345:12345+len(got)]) {
			t.Fatalf("%s: ReadAt %d bytes, %v, or they differ", c.name, n, err)
		}
	}
	proxy.Lock()
	proxy.CutGets = 3
	proxy.Unlock()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("streamed through 3 cuts: %d bytes of %d, %v", len(all), len(data), err)
	}
	proxy.Lock()
	proxy.CutGets = 1 << 30
	proxy.Unlock()
	_, err = f.ReadAt(make([]byte, 1<<20), 0)
	if err == nil || !strings.Contains(err.Error(), "s3://faults/blob.bin") {
		t.Fatalf("a server that always cuts: %v", err)
	}
}

// An object replaced while it is read is an error naming it, never a mix
// of its two versions: every request of a read asks for the version the
// read opened (If-Match its ETag).
func TestReadPinsTheVersion(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "pinned")
	url := srv.URL("pinned", "obj.bin")
	bucket, err := blob.OpenBucket(t.Context(), "s3://pinned?endpoint="+srv.Endpoint+"&use_path_style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	first, second := bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<16)
	if err := bucket.WriteAll(t.Context(), "obj.bin", first, nil); err != nil {
		t.Fatal(err)
	}
	o := storage.NewOpener()
	defer o.Close()
	f, err := o.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, 100)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, first[:100]) {
		t.Fatalf("before the change: %v", err)
	}
	if err := bucket.WriteAll(t.Context(), "obj.bin", second, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(got, 1000); !errors.Is(err, storage.ErrChanged) || !strings.Contains(err.Error(), "s3://pinned/obj.bin") {
		t.Fatalf("after the change: %v, want ErrChanged naming the object", err)
	}
}

// On GCS the read is pinned to the object's generation, on Azure to its
// ETag (If-Match): replaced under a read, it is ErrChanged naming the
// object.
func TestGCSAndAzureReadsArePinned(t *testing.T) {
	gcs := gcstest.Start(t)
	gcs.Bucket(t, "pinned")
	az := aztest.Start(t)
	az.Container(t, "pinned")
	for _, url := range []string{gcs.URL("pinned", "obj.bin"), az.URL("pinned", "obj.bin")} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) { pinnedRead(t, url) })
	}
}

func pinnedRead(t *testing.T, url string) {
	o := storage.NewOpener()
	defer o.Close()
	first, second := bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<16)
	if err := o.WriteFile(t.Context(), url, first, false); err != nil {
		t.Fatal(err)
	}
	f, err := o.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, 100)
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, first[:100]) {
		t.Fatalf("before the change: %v", err)
	}
	if err := o.WriteFile(t.Context(), url, second, true); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReadAt(got, 1000); !errors.Is(err, storage.ErrChanged) || !strings.Contains(err.Error(), "//pinned/obj.bin") {
		t.Fatalf("after the change: %d bytes (%q…), %v; want ErrChanged naming the object", n, got[:4], err)
	}
	// A stream, too.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(got); !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("a stream after the change: %v, want ErrChanged", err)
	}
}

// What a person can act on, in one line naming the URL and never the
// secret: a bucket that does not exist, credentials refused, credentials
// missing (S3's chain, Google's default credentials).
func TestCredentialAndBucketErrors(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "there")
	ctx := t.Context()
	check := func(what string, err error, want error, says ...string) {
		t.Helper()
		if !errors.Is(err, want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: %v, want %v in one line", what, err, want)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %v does not say %q", what, err, s)
			}
		}
	}
	_, err := storage.NewOpener().Glob(ctx, srv.URL("nobucket", "*.parquet"))
	check("an unknown bucket", err, storage.ErrNotFound, "s3://nobucket/", "no such bucket")

	// VersityGW refuses a wrong secret as AccessDenied (MinIO as
	// SignatureDoesNotMatch): a 403 either way, credentials refused.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-1234")
	_, err = storage.NewOpener().Open(ctx, srv.URL("there", "a.parquet"))
	check("a wrong secret", err, storage.ErrDenied, "s3://there/a.parquet")
	if strings.Contains(err.Error(), "not-the-secret-1234") {
		t.Fatalf("the secret in the message: %v", err)
	}

	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // no instance role to look for
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	_, err = storage.NewOpener().Open(ctx, srv.URL("there", "a.parquet"))
	check("no AWS credentials", err, storage.ErrNoCredentials, "s3://there/a.parquet", "AWS_ACCESS_KEY_ID")

	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	_, err = storage.NewOpener().Open(ctx, "gs://some-bucket/a.parquet")
	check("no Google credentials", err, storage.ErrNoCredentials, "gs://some-bucket", "GOOGLE_APPLICATION_CREDENTIALS")
}

// A listing whose response is cut mid-body is asked for again: a folder
// lists, and globs, every object.
func TestListingSurvivesACutResponse(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "cut")
	proxy := srv.Proxy(t)
	o := storage.NewOpener()
	defer o.Close()
	for _, name := range []string{"a.csv", "b.csv", "c.csv"} {
		if err := o.WriteFile(t.Context(), proxy.URL("cut", "d/"+name), []byte("x\n1\n"), false); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		list func() (int, error)
	}{
		{"List", func() (int, error) { e, err := o.List(t.Context(), proxy.URL("cut", "d/")); return len(e), err }},
		{"Glob", func() (int, error) { g, err := o.Glob(t.Context(), proxy.URL("cut", "d/*.csv")); return len(g), err }},
	} {
		proxy.Lock()
		proxy.CutGets = 2
		proxy.Unlock()
		if n, err := c.list(); err != nil || n != 3 {
			t.Fatalf("%s through two cut responses: %d objects, %v", c.name, n, err)
		}
	}
}

// What reaches a person names the bucket that is missing, not the object
// a request was for; a refused signature is ErrDenied; a presigned URL's
// signature never appears in a message.
func TestErrorsSayWhatToFix(t *testing.T) {
	srv := s3test.Start(t)
	o := storage.NewOpener()
	defer o.Close()
	err := o.WriteFile(t.Context(), srv.URL("nobucket", "out/.preds.lock"), []byte("x"), false)
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "s3://nobucket/?") || strings.Contains(err.Error(), "lock") {
		t.Fatalf("a missing bucket: %v", err)
	}
	presigned := "http://127.0.0.1:1/b/k.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE&X-Amz-Signature=deadbeefsecret"
	_, err = o.Open(t.Context(), presigned)
	if err == nil || strings.Contains(err.Error(), "deadbeefsecret") || strings.Contains(err.Error(), "AKIDEXAMPLE") {
		t.Fatalf("a presigned URL's error: %v", err)
	}
}
