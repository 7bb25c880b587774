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

	"github.com/drainpipe/drainpipe/internal/testing/filetest"
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

// A footer read as file formats read it (its length in the last bytes,
// then the footer before them) costs one request: the first read ending
// at the object's end fetches its tail. A later read overlapping the
// tail fetches only the bytes before it, so no byte is fetched twice.
func TestTailFetchedOnce(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small.bin"), data[:3000], 0o644); err != nil {
		t.Fatal(err)
	}
	base := serveFiles(t, dir, true)
	ctx := context.Background()
	read := func(f storage.File, want []byte, off, n int64) {
		t.Helper()
		got := make([]byte, n)
		if k, err := f.ReadAt(got, off); err != nil || k != int(n) || !bytes.Equal(got, want[off:off+n]) {
			t.Fatalf("ReadAt(%d bytes at %d): %d, %v, equal %t", n, off, k, err, bytes.Equal(got, want[off:off+n]))
		}
	}
	o := storage.NewOpener()
	defer o.Close()
	f, err := o.Open(ctx, base+"/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	read(f, data, size-8, 8)
	read(f, data, size-1008, 1000)
	if tr := o.Traffic()[base+"/big.bin"]; tr.Requests != 2 || tr.Bytes != 16<<10 {
		t.Fatalf("a footer read: %+v, want a HEAD and one GET of the last 16 KiB", tr)
	}
	read(f, data, size-40_000, 39_000) // overlaps the tail
	read(f, data, 0, size-40_000)
	if tr := o.Traffic()[base+"/big.bin"]; tr.Requests != 4 || tr.Bytes != size {
		t.Fatalf("the whole object read: %+v, want 4 requests and each byte fetched once", tr)
	}
	f.Close()

	small, err := o.Open(ctx, base+"/small.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	read(small, data[:3000], 2992, 8)
	read(small, data[:3000], 0, 2992)
	if tr := o.Traffic()[base+"/small.bin"]; tr.Requests != 2 || tr.Bytes != 3000 {
		t.Fatalf("a small object: %+v, want a HEAD and one GET of all of it", tr)
	}

	// Planned, then read: the footer read opening it once, all of it
	// read opening it again (the Opener keeps the tail between them).
	if err := os.WriteFile(filepath.Join(dir, "mid.bin"), data[:20_000], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, part := range [][2]int64{{19_992, 8}, {0, 20_000}} {
		f, err := o.Open(ctx, base+"/mid.bin")
		if err != nil {
			t.Fatal(err)
		}
		read(f, data[:20_000], part[0], part[1])
		f.Close()
	}
	// (Over http, each opening looks at the file: a HEAD.)
	if tr := o.Traffic()[base+"/mid.bin"]; tr.Requests != 4 || tr.Bytes != 20_000 {
		t.Fatalf("an object planned, then read: %+v, want two HEADs, the tail and the rest, each byte once", tr)
	}
}
