package main

import (
	"bytes"
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
	if got := lines[len(lines)-1]; got != "rows=100 batches=7 padded=12 shutdown=ok" {
		t.Fatalf("summary %q", got)
	}
	for _, want := range []string{
		"device: session started, batch size 16",
		"step 7: 4 images + 12 padding",
		"  images 96..99 -> classes [",
		"device: session shut down (err=<nil>)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// One screen: a line a step, a line of classes a step, and the
	// session's start, shutdown and summary; the padding never printed.
	if len(lines) != 17 || strings.Count(out.String(), "-> classes") != 7 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	last := out.String()[strings.Index(out.String(), "images 96..99 -> classes ["):]
	if classes := strings.Fields(last[strings.Index(last, "[")+1 : strings.Index(last, "]")]); len(classes) != 4 {
		t.Fatalf("the last step's classes %v, want 4 (no padding)", classes)
	}
}
