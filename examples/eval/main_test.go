package main

import (
	"bytes"
	"regexp"
	"strconv"
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
	text := out.String()
	if !strings.Contains(text, "evaluated 537 held-out rows in batches of 64 (the last one 25 rows + 39 padding)") {
		t.Fatalf("output:\n%s", text)
	}
	m := regexp.MustCompile(`accuracy\s+([0-9.]+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no accuracy in:\n%s", text)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 0.7 || acc >= 1 {
		t.Fatalf("accuracy %v: the blobs overlap a little, so expect high but not perfect", acc)
	}
}
