//go:build onnx

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/device/onnx"
)

const buildTags = "onnx"

func TestONNXModel(t *testing.T) {
	if onnx.DefaultLibrary() == "" {
		t.Skip("ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set " + onnx.LibraryEnv)
	}
	dir := fixture(t, 1000, 64, 4)
	model, _ := filepath.Abs(filepath.Join("..", "..", "device", "onnx", "testdata", "mlp.onnx"))
	out := filepath.Join(dir, "out.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", model, "--input", filepath.Join(dir, "in-*.parquet"),
		"--output", out, "--keep", "id", "--batch-size", "64", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=1000 batches=16 padded=24") {
		t.Fatalf("summary %q", stdout)
	}
	stdout, _, err = drainpipe("inspect", out)
	if err != nil || !strings.Contains(stdout, "probabilities") || !strings.Contains(stdout, "class") {
		t.Fatalf("inspect: %v\n%s", err, stdout)
	}
}
