package fileset

import (
	"slices"
	"testing"
)

// Chunks closer than the gap become one request; farther ones stay apart;
// order and overlap do not matter.
func TestCoalesce(t *testing.T) {
	got := coalesce([]byteRange{{5000, 100}, {0, 1000}, {1000, 4000}, {10_000_000, 10}, {4500, 100}})
	want := []byteRange{{0, 5100}, {10_000_000, 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("coalesce: %v, want %v", got, want)
	}
}
