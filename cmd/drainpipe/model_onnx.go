//go:build onnx

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"

	"github.com/drainpipe/drainpipe/device/onnx"
)

// loadONNX opens an ONNX model with one input; its feature column is
// column (or the input's name).
func loadONNX(path, column string) (*loadedModel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	probe, err := onnx.Open(path)
	if err != nil {
		return nil, err
	}
	inputs := probe.Inputs()
	if len(inputs) != 1 {
		return nil, fmt.Errorf("model %s: %d inputs %v; the CLI runs models with one input", path, len(inputs), inputs)
	}
	if column == "" {
		column = inputs[0]
	}
	m, err := onnx.Open(path, onnx.WithInput(inputs[0], column))
	if err != nil {
		return nil, err
	}
	width, err := m.InputWidth(inputs[0])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	// One-thread sessions side by side beat one session on every core
	// here too (BENCHMARKS.md), at the cost of a copy of the weights each.
	return &loadedModel{model: m, inputSize: width, feature: column, id: hex.EncodeToString(sum[:]),
		sessions: runtime.GOMAXPROCS(0)}, nil
}
