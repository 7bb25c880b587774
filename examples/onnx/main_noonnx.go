//go:build !onnx

// Command onnx needs the onnx build tag: go run -tags onnx ./examples/onnx
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "onnx: build with -tags onnx (and fetch the library with scripts/fetch-onnxruntime.sh)")
	os.Exit(2)
}
