package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestRun(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var out bytes.Buffer
	if err := run(t.Context(), &out, mem); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var n, rows, sent int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "records=%d rows=%d (sent %d)", &n, &rows, &sent); err != nil || n != 60 || rows != sent || rows == 0 {
		t.Fatalf("summary %q: %v", lines[len(lines)-1], err)
	}
	for i := range 60 {
		if !strings.Contains(out.String(), fmt.Sprintf("record %2d: ", i)) {
			t.Fatalf("no result for record %d", i)
		}
	}
}
