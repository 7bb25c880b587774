package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Writes begin the writeback of every writebackBytes written, range after
// range from the file's start, and leave the bytes as written.
func TestWriteBeginsWriteback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var ranges [][2]int64
	begin := f.writeback
	f.writeback = func(file *os.File, off, n int64) {
		ranges = append(ranges, [2]int64{off, n})
		begin(file, off, n)
	}
	chunk := bytes.Repeat([]byte("drainpipe"), 256<<10/9+1)
	var want []byte
	for len(want) < 2*writebackBytes+len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunk...)
	}
	if len(ranges) != 2 {
		t.Fatalf("%d writebacks begun for %d bytes written, want 2: %v", len(ranges), len(want), ranges)
	}
	next := int64(0)
	for _, r := range ranges {
		if r[0] != next || r[1] < writebackBytes || r[1] >= writebackBytes+int64(len(chunk)) {
			t.Fatalf("writebacks %v: want ranges one after another from 0, each at least %d bytes and under a write more", ranges, writebackBytes)
		}
		next += r[1]
	}
	if err := f.Commit(false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}
