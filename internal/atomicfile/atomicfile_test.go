package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/internal/atomicfile"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

func TestCommitAbortReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	f, err := atomicfile.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("visible before Commit")
	}
	if err := f.Commit(false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("committed: %v, %v", st, err)
	}
	g, _ := atomicfile.Create(path)
	g.WriteString("two")
	if err := g.Commit(false); !errors.Is(err, atomicfile.ErrExists) {
		t.Fatalf("no replace: %v", err)
	}
	h, _ := atomicfile.Create(path)
	h.WriteString("three")
	h.Abort()
	if err := atomicfile.WriteFile(path, []byte("four")); err != nil {
		t.Fatal(err)
	}
	if b := arrowtest.ReadFile(t, path); string(b) != "four" {
		t.Fatalf("content %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
