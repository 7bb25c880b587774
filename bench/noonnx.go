//go:build !onnx

package main

import "github.com/drainpipe/drainpipe/device"

func onnxModel(int) (device.Model, string) {
	return nil, "skipped: build with -tags onnx"
}
