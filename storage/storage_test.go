package storage

import (
	"context"
	"errors"
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
