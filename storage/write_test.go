package storage_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/aztest"
	"github.com/drainpipe/drainpipe/internal/testing/gcstest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/storage"
)

// Writes land whole or not at all, on disk, on a real S3 server, on a GCS
// emulator and on an Azure Blob emulator: an
// aborted write (small, or a multipart upload under way) leaves nothing;
// a write that may not replace loses to an object that is there (the
// conditional write); a listing names the folder's files with their sizes.
func TestWriteWholeOrNothing(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "out")
	gcs := gcstest.Start(t)
	gcs.Bucket(t, "out")
	az := aztest.Start(t)
	az.Container(t, "out")
	ctx := context.Background()
	o := storage.NewOpener()
	defer o.Close()
	big := make([]byte, 12<<20) // over the 5 MiB part size: a multipart upload
	for i := range big {
		big[i] = byte(rand.Uint32())
	}
	for name, dir := range map[string]string{"local": t.TempDir() + "/", "s3": srv.URL("out", "run/"), "gcs": gcs.URL("out", "run/"), "azure": az.URL("out", "run/")} {
		t.Run(name, func(t *testing.T) {
			a := storage.Join(dir, "a.bin")
			if err := o.WriteFile(ctx, a, []byte("first"), false); err != nil {
				t.Fatal(err)
			}
			if err := o.WriteFile(ctx, a, []byte("second"), false); !errors.Is(err, storage.ErrExists) {
				t.Fatalf("a write that may not replace: %v, want ErrExists", err)
			}
			if got, err := o.ReadFile(ctx, a); err != nil || string(got) != "first" {
				t.Fatalf("after the refused write: %q, %v", got, err)
			}
			if err := o.WriteFile(ctx, a, []byte("second"), true); err != nil {
				t.Fatal(err)
			}
			if got, _ := o.ReadFile(ctx, a); string(got) != "second" {
				t.Fatalf("after the replacing write: %q", got)
			}

			for _, size := range []int{100, len(big)} {
				w, err := o.Create(ctx, storage.Join(dir, "aborted.bin"), false)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(big[:size]); err != nil {
					t.Fatal(err)
				}
				w.Abort()
			}
			w, err := o.Create(ctx, storage.Join(dir, "big.bin"), false)
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(big); off += 1 << 20 {
				if _, err := w.Write(big[off : off+1<<20]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			if got, err := o.ReadFile(ctx, storage.Join(dir, "big.bin")); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("big object read back: %d bytes, %v", len(got), err)
			}
			if err := storage.MkdirAll(storage.Join(dir, "sub")); err != nil {
				t.Fatal(err)
			}
			if err := o.WriteFile(ctx, storage.Join(dir, "sub/c.bin"), []byte("c"), false); err != nil {
				t.Fatal(err)
			}
			list, err := o.List(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			want := []storage.Entry{{Name: "a.bin", Size: 6}, {Name: "big.bin", Size: int64(len(big))}}
			if !slices.Equal(list, want) {
				t.Fatalf("List = %v, want %v (no aborted write, no sub-folder)", list, want)
			}
			if err := o.Remove(ctx, storage.Join(dir, "a.bin")); err != nil {
				t.Fatal(err)
			}
			if err := o.Remove(ctx, storage.Join(dir, "a.bin")); err != nil {
				t.Fatalf("removing what is gone: %v", err)
			}
			if err := o.RemoveAll(ctx, dir); err != nil {
				t.Fatal(err)
			}
			if list, err := o.List(ctx, storage.Join(dir, "sub/")); err != nil || len(list) != 0 {
				t.Fatalf("after RemoveAll: %v, %v", list, err)
			}
		})
	}
	// The server holds no trace of the aborted uploads either.
	if _, err := os.Stat(filepath.Join(srv.Root, "out", "run", "aborted.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("aborted object on the server: %v", err)
	}
}

func TestJoinSplit(t *testing.T) {
	for _, c := range []struct{ name, dir, elem string }{
		{"s3://b/out/part-1.parquet?endpoint=http://h:1&region=r", "s3://b/out/?endpoint=http://h:1&region=r", "part-1.parquet"},
		{"s3://b/preds/", "s3://b/", "preds"},
		{"gs://b/k", "gs://b/", "k"},
		{"data/out.parquet", "data", "out.parquet"},
	} {
		dir, elem := storage.Split(c.name)
		if dir != c.dir || elem != c.elem {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", c.name, dir, elem, c.dir, c.elem)
		}
	}
	if got := storage.Join("s3://b/out/?region=r", "x.bin"); got != "s3://b/out/x.bin?region=r" {
		t.Errorf("Join: %s", got)
	}
	if !storage.IsFolder("s3://b/out/?region=r") || storage.IsFolder("s3://b/out.parquet?x=a/") {
		t.Error("IsFolder: a URL is a folder by its key")
	}
}
