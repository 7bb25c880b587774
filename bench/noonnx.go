//go:build !onnx

package main

import "github.com/drainpipe/drainpipe/predict"

func onnxModel(int) (predict.Model, string) {
	return nil, "skipped: build with -tags onnx"
}
