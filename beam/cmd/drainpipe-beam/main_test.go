package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// A runner's error ends with what the failing step said; that is the line
// printed, not the plan around it.
func TestCause(t *testing.T) {
	err := errors.New("job job-001 failed:\nbundle inst001 failed: while executing Process for Plan[stage-001]:\n1: DataSource[...]\n\tcaused by:\nDoFn[...] failed:\nno input files: \"x-*.parquet\" matches nothing\n")
	if got := cause(err); got != `no input files: "x-*.parquet" matches nothing` {
		t.Fatalf("cause: %q", got)
	}
}

// On the local runner an input that matches nothing is refused before the
// pipeline starts.
func TestPreflight(t *testing.T) {
	err := preflight([]string{filepath.Join(t.TempDir(), "none-*.parquet")}, 1<<18)
	if err == nil || !strings.Contains(err.Error(), "none-*.parquet") {
		t.Fatalf("preflight of nothing: %v", err)
	}
}
