package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/filetest"
	"github.com/drainpipe/drainpipe/storage"
)

// serveFiles serves dir on 127.0.0.1 for the test: Go's file server
// (Last-Modified, ranges), or with etags the same content with a strong
// ETag of each file's bytes.
func serveFiles(t *testing.T, dir string, etags bool) string {
	t.Helper()
	var h http.Handler = http.FileServer(http.Dir(dir))
	if etags {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path := filepath.Join(dir, filepath.FromSlash(r.URL.Path))
			data, err := os.ReadFile(path)
			if err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("ETag", fmt.Sprintf(`"%x"`, sha256.Sum256(data)))
			http.ServeContent(w, r, path, time.Time{}, bytes.NewReader(data))
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// An http(s) URL reads as a file, by range requests, pinned to the
// version first seen (its ETag, or else its Last-Modified time): a file
// replaced under the read is ErrChanged. It cannot be listed or written.
func TestHTTPFiles(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	path := filepath.Join(dir, "blob.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, etags := range []bool{false, true} {
		t.Run(fmt.Sprintf("etags=%t", etags), func(t *testing.T) {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			base := serveFiles(t, dir, etags)
			o := storage.NewOpener()
			defer o.Close()
			f, err := o.Open(ctx, base+"/blob.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := make([]byte, 1000)
			if n, err := f.ReadAt(got, 77777); err != nil || n != 1000 || !bytes.Equal(got, data[77777:78777]) {
				t.Fatalf("ReadAt: %d, %v", n, err)
			}
			all, err := io.ReadAll(f)
			if err != nil || !bytes.Equal(all, data) {
				t.Fatalf("Read: %d bytes, %v", len(all), err)
			}
			tr := o.Traffic()[base+"/blob.bin"]
			if tr.Requests != 3 || tr.Bytes != int64(len(data))+1000 || tr.Size != int64(len(data)) {
				t.Fatalf("traffic %+v: want a HEAD and two GETs", tr)
			}
			// Replaced, and a second later by the clock of Last-Modified.
			if err := os.WriteFile(path, bytes.ToUpper(data), 0o644); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(10 * time.Second)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(got, 0); !errors.Is(err, storage.ErrChanged) || !strings.Contains(err.Error(), "blob.bin") {
				t.Fatalf("a file replaced under the read: %v, want ErrChanged", err)
			}
			if _, err := o.Open(ctx, base+"/blob.bin"); !errors.Is(err, storage.ErrChanged) {
				t.Fatalf("opened again after it changed: %v, want ErrChanged", err)
			}
			if _, err := o.Open(ctx, base+"/none.bin"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("a missing file: %v", err)
			}
			for _, bad := range []func() error{
				func() error { _, err := o.Glob(ctx, base+"/*.bin"); return err },
				func() error { _, err := o.List(ctx, base+"/"); return err },
				func() error { return o.WriteFile(ctx, base+"/new.bin", nil, true) },
				func() error { return o.Remove(ctx, base+"/blob.bin") },
			} {
				if err := bad(); err == nil || !strings.Contains(err.Error(), "read only") {
					t.Errorf("an http URL listed, written or removed: %v", err)
				}
			}
		})
	}
}

// A Parquet file written by another tool reads over HTTP as it reads from
// disk, row for row.
func TestHTTPParquet(t *testing.T) {
	dir := filepath.Join("..", "dataset", "fileset", "testdata", "writers", "files")
	name := "arrowrs-list.parquet"
	base := serveFiles(t, dir, false)
	local := filetest.ReadWhole(t, memory.DefaultAllocator, filepath.Join(dir, name))
	defer local.Release()
	remote := filetest.ReadWhole(t, memory.DefaultAllocator, base+"/"+name)
	defer remote.Release()
	if !array.RecordEqual(local, remote) || local.NumRows() == 0 {
		t.Fatalf("%d rows over HTTP differ from the %d from disk", remote.NumRows(), local.NumRows())
	}
}
