package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsURL(t *testing.T) {
	for name, want := range map[string]bool{
		"s3://b/k.parquet": true, "gs://b/k": true, "azblob://c/k?x=1": true,
		"data/in.parquet": false, "/abs/in.parquet": false, `C:\in.parquet`: false, "s3://": false, "./x://y": false,
	} {
		if got := IsURL(name); got != want {
			t.Errorf("IsURL(%q) = %t, want %t", name, got, want)
		}
	}
}

// A URL's query values that may hold secrets never reach a message; the
// settings that say where the server is do.
func TestRedact(t *testing.T) {
	got := redact("s3://b/k?endpoint=http://127.0.0.1:9000&region=us-east-1&secret_access_key=hunter2")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "endpoint=http") || !strings.Contains(got, "secret_access_key=") {
		t.Fatalf("redact: %s", got)
	}
}

// Local paths: a missing file is ErrNotFound; a glob lists the folder.
func TestLocal(t *testing.T) {
	o := NewOpener()
	defer o.Close()
	if _, err := o.Open(context.Background(), filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if got, err := o.Glob(context.Background(), filepath.Join(t.TempDir(), "*.csv")); err != nil || len(got) != 0 {
		t.Fatalf("empty glob: %v, %v", got, err)
	}
}

// ** spans folders; a folder names the data files below it, passing over
// markers and temporary files; an output folder still being written is
// refused.
func TestGlobFoldersAndDoubleStar(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.parquet", "sub/b.parquet", "sub/deep/c.csv", "sub/notes.txt",
		"_SUCCESS", ".tmp-x.parquet", "sub/_part.parquet"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOpener()
	defer o.Close()
	rel := func(paths []string) string {
		var out []string
		for _, p := range paths {
			r, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(r))
		}
		return strings.Join(out, " ")
	}
	// A glob names what it matches (as filepath.Glob, * matches a leading
	// dot); a folder passes over markers and temporary files.
	for pattern, want := range map[string]string{
		filepath.Join(dir, "**", "*.parquet"): ".tmp-x.parquet a.parquet sub/_part.parquet sub/b.parquet",
		filepath.Join(dir, "*.parquet"):       ".tmp-x.parquet a.parquet",
		dir:                                   "a.parquet sub/b.parquet sub/deep/c.csv",
	} {
		got, err := o.Glob(context.Background(), pattern)
		if err != nil || rel(got) != want {
			t.Errorf("Glob(%s) = %q, %v; want %q", pattern, rel(got), err, want)
		}
	}
	// A finished output folder with a manifest is what its manifest names,
	// in its order: not a file an earlier run left, nor one named twice.
	manifest := `{"parts": [{"file": "sub/b.parquet"}, {"file": ""}, {"file": "a.parquet"}]}`
	if err := os.WriteFile(filepath.Join(dir, "_manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := o.Glob(context.Background(), dir); err != nil || rel(got) != "sub/b.parquet a.parquet" {
		t.Errorf("a folder with a manifest: %q, %v", rel(got), err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_manifest.json"), []byte(`{"parts": [{"file": "gone.parquet"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Glob(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "names gone.parquet, which is not there") {
		t.Errorf("a manifest naming a missing file: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "_SUCCESS")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Glob(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "still being written") {
		t.Fatalf("an unfinished output folder: %v", err)
	}
}
