package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
)

// sessionsHelp describes every command's --sessions flag.
const sessionsHelp = "session groups taking whole batches side by side, one core each (0: one a core)"

// loadedModel is a model file opened for a job.
type loadedModel struct {
	model     device.Model
	inputSize int
	feature   string // the feature column the model names, if any
	id        string // content digest
	sessions  int    // session groups that run it fastest
}

// loadModel opens a model file: an ONNX model (.onnx), whose input reads
// column (default: the input's name), or a drainpipe MLP (any other name),
// which reads column (default: the one its file names).
func loadModel(path, column string) (*loadedModel, error) {
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		return loadONNX(path, column)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	m, err := cpu.Load(io.TeeReader(f, h))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	if column != "" {
		m.Feature = column // --feature-column names the column the model reads
	}
	// One single-threaded session a core beat one session on both cores
	// 1.5–1.7× (BENCHMARKS.md).
	return &loadedModel{model: m, inputSize: m.InputSize(), feature: m.Feature, id: hex.EncodeToString(h.Sum(nil)),
		sessions: runtime.GOMAXPROCS(0)}, nil
}
