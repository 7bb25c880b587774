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
		"  image  99 -> class ",
		"device: session shut down (err=<nil>)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(out.String(), "-> class"); n != 100 {
		t.Fatalf("%d predictions printed, want 100", n)
	}
}
