//go:build onnx

package main

import (
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/onnx"
)

// onnxModel returns the ONNX Runtime MLP 64-256-256-10 of the onnx device's
// tests, for the mlp workload's onnx runners, or a note why there is none.
func onnxModel(threads int) (device.Model, string) {
	if onnx.DefaultLibrary() == "" {
		return nil, "skipped: no ONNX Runtime library (scripts/fetch-onnxruntime.sh)"
	}
	m, err := onnx.Open("device/onnx/testdata/mlp.onnx", onnx.WithIntraOpThreads(threads))
	if err != nil {
		return nil, "skipped: " + err.Error()
	}
	return m, ""
}
