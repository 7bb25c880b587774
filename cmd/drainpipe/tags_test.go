//go:build !onnx

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// buildTags are the tags the tests build the command with.
const buildTags = ""

func TestONNXNeedsTheTag(t *testing.T) {
	dir := fixture(t, 100, 8, 4)
	_, stderr, err := drainpipe("predict", "--model", filepath.Join("..", "..", "device", "onnx", "testdata", "mlp.onnx"),
		"--input", filepath.Join(dir, "in-*.parquet"), "--output", filepath.Join(dir, "o.parquet"))
	if err == nil || !strings.Contains(stderr, "built without ONNX support") {
		t.Fatalf("err %v, stderr %q", err, stderr)
	}
}
