package storage_test

import (
	"bytes"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/storage"
)

// keyURL is the URL of key on srv, the key escaped as a URL's path is.
func keyURL(srv *s3test.Server, bucket, key string) string {
	return srv.URL(bucket, (&url.URL{Path: key}).EscapedPath())
}

// Keys with characters a URL gives meaning to — a space, unicode, %, ?,
// #, + — round-trip through writing, reading, listing, globbing, Join and
// Split: every name a listing returns opens the object it lists, and a
// glob matches them as the characters they are.
func TestKeysRoundTrip(t *testing.T) {
	for _, srv := range map[string]*s3test.Server{"versitygw": s3test.Start(t), "gofakes3": s3test.StartGoFakeS3(t)} {
		srv.Bucket(t, "keys")
		o := storage.NewOpener()
		defer o.Close()
		keys := []string{"d/plain.csv", "d/with space.csv", "d/café €.csv", "d/100%.csv", "d/a%2Fb.csv", "d/q?x.csv", "d/hash#1.csv", "d/a+b.csv"}
		for _, k := range keys {
			if err := o.WriteFile(t.Context(), keyURL(srv, "keys", k), []byte(k), false); err != nil {
				t.Fatalf("write %q: %v", k, err)
			}
		}
		listed, err := o.Glob(t.Context(), srv.URL("keys", "d/"))
		if err != nil {
			t.Fatal(err)
		}
		globbed, err := o.Glob(t.Context(), srv.URL("keys", "d/*.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != len(keys) || !slices.Equal(listed, globbed) {
			t.Fatalf("the folder lists %d names, the glob %d, want %d each:\n%s", len(listed), len(globbed), len(keys), strings.Join(listed, "\n"))
		}
		for _, name := range listed {
			data, err := o.ReadFile(t.Context(), name)
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			if !slices.Contains(keys, string(data)) {
				t.Fatalf("%s holds %q, another object's", name, data)
			}
			dir, elem := storage.Split(name)
			if back := storage.Join(dir, elem); back != name || "d/"+elem != string(data) {
				t.Fatalf("Split(%s) = %s, %q; Join gives %s", name, dir, elem, back)
			}
		}
		// A literal ? in a key is that character, not a glob's.
		got, err := o.Glob(t.Context(), keyURL(srv, "keys", "d/q?x.*"))
		if err != nil || len(got) != 1 {
			t.Fatalf("the glob d/q%%3Fx.*: %v, %v", got, err)
		}
	}
}

// A # written as it is in a URL makes the rest of it, the query with its
// endpoint, a fragment that is never sent: such a URL is refused, never
// sent to the cloud's own endpoint with the user's credentials.
func TestHashInURLRefused(t *testing.T) {
	o := storage.NewOpener()
	defer o.Close()
	_, err := o.Open(t.Context(), "s3://b/a#b.parquet?endpoint=http://127.0.0.1:1&use_path_style=true&region=us-east-1")
	if err == nil || !strings.Contains(err.Error(), "%23") || errors.Is(err, storage.ErrNoCredentials) {
		t.Fatalf("a raw # in a URL: %v", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte("amazonaws")) {
		t.Fatalf("sent to AWS: %v", err)
	}
}
