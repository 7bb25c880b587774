//go:build onnx

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

func TestRun(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+onnx.LibraryEnv)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var out bytes.Buffer
	if err := run(t.Context(), &out, mem); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "rows=1000 batches=16 padded=24") {
		t.Fatalf("output:\n%s", out.String())
	}
}
