//go:build !onnx

package main

import "errors"

func loadONNX(path, column string, _ *sequenceFlags) (*loadedModel, error) {
	return nil, errors.New("model " + path + ": this drainpipe was built without ONNX support; build it with -tags onnx")
}
