package storage_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/storage"
)

// A store that ignores If-Match on reads (gofakes3 serves whatever it
// holds now) still never mixes two versions into one read: each response
// is checked against the pinned version, and a replaced object is
// ErrChanged naming it.
func TestReadsCheckTheVersionAnswered(t *testing.T) {
	for name, srv := range map[string]*s3test.Server{"gofakes3": s3test.StartGoFakeS3(t), "versitygw": s3test.Start(t)} {
		t.Run(name, func(t *testing.T) {
			srv.Bucket(t, "pinned")
			pinnedRead(t, srv.URL("pinned", "obj.bin"))
		})
	}
}

// The same over http(s), from a web server that ignores If-Match and
// If-Unmodified-Since: the ETag (or Last-Modified) answered is checked.
func TestHTTPReadsCheckTheVersionAnswered(t *testing.T) {
	for _, etag := range []bool{true, false} {
		var version atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("If-Match")
			r.Header.Del("If-Unmodified-Since")
			v := version.Load()
			if etag {
				w.Header().Set("ETag", `"v`+string(rune('0'+v))+`"`)
			}
			http.ServeContent(w, r, "obj.bin", time.Unix(1700000000+int64(v)*10, 0), bytes.NewReader(bytes.Repeat([]byte{byte('a' + v)}, 1<<16)))
		}))
		o := storage.NewOpener()
		f, err := o.Open(t.Context(), srv.URL+"/obj.bin")
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 100)
		if _, err := f.ReadAt(got, 0); err != nil || got[0] != 'a' {
			t.Fatalf("before the change: %v", err)
		}
		version.Store(1)
		if _, err := f.ReadAt(got, 1000); !errors.Is(err, storage.ErrChanged) {
			t.Fatalf("etag %v: after the change: %q…, %v; want ErrChanged", etag, got[:4], err)
		}
		f.Close()
		o.Close()
		srv.Close()
	}
}
