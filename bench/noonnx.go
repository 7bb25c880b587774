//go:build !onnx

package main

import (
	"github.com/apache/arrow-go/v18/arrow"
	"log"

	"github.com/drainpipe/drainpipe/device"
)

func onnxModel(int) (device.Model, string) {
	return nil, "skipped: build with -tags onnx"
}

func onnxGoals(*config, []arrow.RecordBatch) []goal { return nil }

func seqONNXGoals(*config) []goal { return nil }

func probeSeqMemory(string) { log.Fatal("-seq-memory: built without the onnx tag") }

// onnxBuilt says this build has the onnx tag.
const onnxBuilt = false
