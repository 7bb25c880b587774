package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/internal/atomicfile"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/storage"
	"github.com/drainpipe/drainpipe/tensor"
	"github.com/drainpipe/drainpipe/tokenizer"
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
	// seq is set for a sequence model (a transformer over token ids):
	// feature is then its token column, and typeIDs its type-id column.
	seq       *seq.Model
	seqInputs []string // the graph's inputs
	fileSHA   string   // the ONNX file's digest (id also holds the settings)
	typeIDs   string
	window    int
	// tok encodes the text column text (with textPair's as pairs) into
	// the token column (feature), rows of at most maxTextBytes.
	tok          *tokenizer.Tokenizer
	text         string
	textPair     string
	maxTextBytes int64
	// folder is the model folder a sequence model was read from.
	folder *hfmodel.Folder
	// cut counts the texts tok's truncation cut, which the model sees
	// already within its length: its truncated rows beside seq's.
	cut atomic.Int64
}

// loadModel opens a model file: an ONNX model (.onnx), whose input reads
// column (default: the input's name), or a drainpipe MLP (any other name),
// which reads column (default: the one its file names). An ONNX sequence
// model, or a Hugging Face model folder with one, runs as sq says (nil:
// the defaults).
func loadModel(path, column string, sq *sequenceFlags) (*loadedModel, error) {
	return loadModelAt(path, storage.Info{}, column, sq)
}

// loadModelAt is loadModel of an object read at version pin (its size
// and ETag; none: whatever is there), or failing with storage.ErrChanged.
func loadModelAt(path string, pin storage.Info, column string, sq *sequenceFlags) (*loadedModel, error) {
	if sq == nil {
		sq = defaultSequenceFlags()
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file, err := hfmodel.ModelFile(path)
		if err != nil {
			return nil, err
		}
		return loadONNX(file, column, sq)
	}
	var r io.Reader
	if storage.IsURL(path) {
		// A model on object storage or a web server, as inputs are.
		local, data, err := fetchModel(path, pin)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(modelExt(path), ".onnx") {
			return loadONNX(local, column, sq)
		}
		r = bytes.NewReader(data)
	} else {
		if strings.EqualFold(filepath.Ext(path), ".onnx") {
			return loadONNX(path, column, sq)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		defer f.Close()
		r = f
	}
	h := sha256.New()
	m, err := cpu.Load(io.TeeReader(r, h))
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

// modelExt is a model path's or URL's extension (a URL's without its
// query).
func modelExt(name string) string {
	if storage.IsURL(name) {
		name, _, _ = strings.Cut(name, "?")
	}
	return filepath.Ext(name)
}

// fetchModel reads a model by URL, at version pin if it names one. An
// ONNX model, which ONNX Runtime opens by path, is also kept in the
// user's cache folder under its content's digest, and its path there
// returned; a later run of the same model finds it there.
func fetchModel(url string, pin storage.Info) (local string, data []byte, err error) {
	store := storage.NewOpener()
	defer store.Close()
	if pin.ETag != "" {
		store.Expect(url, pin)
	}
	if data, err = store.ReadFile(context.Background(), url); err != nil {
		return "", nil, fmt.Errorf("model: %w", err)
	}
	if !strings.EqualFold(modelExt(url), ".onnx") {
		return "", data, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(data)
	local = filepath.Join(cache, "drainpipe", "models", hex.EncodeToString(sum[:])+".onnx")
	if st, err := os.Stat(local); err == nil && st.Size() == int64(len(data)) {
		return local, data, nil
	}
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return "", nil, fmt.Errorf("model %s: %w", url, err)
	}
	if err := atomicfile.WriteFile(local, data); err != nil {
		return "", nil, fmt.Errorf("model %s: %w", url, err)
	}
	return local, data, nil
}

// isModelFile reports whether a name is a model file inspect describes,
// or a model folder (with model.onnx or onnx/model.onnx).
func isModelFile(name string) bool {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		_, err := hfmodel.ModelFile(name)
		return err == nil
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".dpmlp", ".onnx":
		return true
	}
	return false
}

// modelInfo is what inspect reports of a model file.
type modelInfo struct {
	File    string      `json:"file"`
	Kind    string      `json:"kind"`
	Input   fieldInfo   `json:"input"`
	Outputs []fieldInfo `json:"outputs,omitempty"`
	SHA256  string      `json:"sha256"`
	// Sequence describes a sequence model: the graph's inputs, each
	// [batch, sequence], and how windows are planned by default.
	Sequence *sequenceInfo `json:"sequence,omitempty"`
	// Stack is a model folder's: tokenizer, length, pooling, modules,
	// head.
	Stack *stackInfo `json:"stack,omitempty"`
}

type sequenceInfo struct {
	GraphInputs []string `json:"graph_inputs"`
	Buckets     []int    `json:"buckets"`
	MaxTokens   int      `json:"max_batch_tokens"`
	Shapes      int      `json:"shapes"`
}

// describeModel loads a model file and says what it reads and writes.
func describeModel(path string) (modelInfo, error) {
	m, err := loadModel(path, "", nil)
	if err != nil {
		return modelInfo{}, err
	}
	info := modelInfo{File: path, Kind: "drainpipe MLP", SHA256: cmp.Or(m.fileSHA, m.id), Input: fieldInfo{Name: cmp.Or(m.feature, cpu.DefaultFeature)}}
	if m.seq == nil {
		info.Input.Type = tensor.Type(m.inputSize).String()
	}
	if strings.EqualFold(filepath.Ext(path), ".onnx") {
		info.Kind = "ONNX"
	}
	if m.seq != nil {
		info.Kind = "ONNX sequence model"
		info.Input.Type = "list<int32 or int64> (token ids)"
		pl := m.seq.Planner()
		info.Sequence = &sequenceInfo{GraphInputs: m.seqInputs, Buckets: pl.Buckets, MaxTokens: pl.MaxTokens, Shapes: len(m.seq.Shapes())}
	}
	if m.folder != nil {
		info.Stack = folderStack(m.folder)
	}
	if o, ok := m.model.(device.OutputSchemaer); ok {
		for _, f := range o.OutputSchema().Fields() {
			info.Outputs = append(info.Outputs, fieldInfo{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable})
		}
	}
	return info, nil
}

func printModel(w io.Writer, m modelInfo) {
	fmt.Fprintf(w, "model: %s\nkind: %s\nsha256: %s\ninput:\n  %s: %s\noutputs:\n", m.File, m.Kind, m.SHA256, m.Input.Name, m.Input.Type)
	for _, o := range m.Outputs {
		fmt.Fprintf(w, "  %s: %s\n", o.Name, o.Type)
	}
	if s := m.Sequence; s != nil {
		fmt.Fprintf(w, "graph inputs: %s, each [batch, sequence]\nsequence buckets: %v\nmax batch tokens: %d (%d shapes)\n",
			strings.Join(s.GraphInputs, ", "), s.Buckets, s.MaxTokens, s.Shapes)
	}
	if m.Stack != nil {
		printStack(w, m.Stack)
	}
}
