package dpbeam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/storage"
)

// Model is a loaded model: the device model and what a job needs of it.
type Model struct {
	Device    device.Model
	InputSize int    // features per row
	Feature   string // the tensor column it reads; "" for "features"
}

// Loader loads a model file.
type Loader func(path string) (*Model, error)

// A Beam worker runs DoFns it decodes from the pipeline: they can carry
// names, not live values. So loaders are found by name, and loaded models
// are shared by every DoFn instance of the process.
var (
	loadersMu sync.Mutex
	loaders   = map[string]Loader{"": loadMLP}

	handlesMu sync.Mutex
	handles   = map[string]*handle{}
)

// RegisterLoader makes a loader known by name to the workers of this
// binary; Config.Loader selects it. Call it from an init function, as
// Beam's own registrations are: for ONNX models, say, in a cgo build with
// the ONNX Runtime library in the worker's container.
func RegisterLoader(name string, l Loader) {
	loadersMu.Lock()
	defer loadersMu.Unlock()
	loaders[name] = l
}

func loadMLP(path string) (*Model, error) {
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".onnx" {
		return nil, fmt.Errorf("dpbeam: %s: no loader for ONNX models in this binary; register one (RegisterLoader) in a cgo build", path)
	}
	m, err := cpu.LoadFile(path)
	if err != nil {
		return nil, err
	}
	// Several DoFns share a worker's cores: each session single-threaded.
	m.Serial = true
	return &Model{Device: m, InputSize: m.InputSize(), Feature: m.Feature}, nil
}

// handle is a model loaded once per process and counted: Setup acquires,
// Teardown releases. Teardown is best effort on Beam (Prism and Dataflow
// may never call it), and that is safe here: a handle holds weights only.
// Sessions, which hold a device, start and shut down inside each shard's
// job, so none outlives the bundle that started it.
type handle struct {
	model *Model
	id    string // content digest, for the job's resume fingerprint
	refs  int
}

func acquire(loader, path string) (*handle, error) {
	key := loader + "\x00" + path
	handlesMu.Lock()
	defer handlesMu.Unlock()
	if h := handles[key]; h != nil {
		h.refs++
		return h, nil
	}
	loadersMu.Lock()
	load := loaders[loader]
	loadersMu.Unlock()
	if load == nil {
		return nil, fmt.Errorf("dpbeam: no loader %q registered in this binary", loader)
	}
	local, data, err := fetchModel(path)
	if err != nil {
		return nil, fmt.Errorf("dpbeam: model: %w", err)
	}
	if local != path {
		defer os.Remove(local)
	}
	m, err := load(local)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	h := &handle{model: m, id: hex.EncodeToString(sum[:]), refs: 1}
	handles[key] = h
	return h, nil
}

// fetchModel returns a local path of the model file and its content: the
// path itself, or for a URL (workers that share no disk) a temporary copy
// under the same extension, which loaders (ONNX Runtime's among them)
// read by name.
func fetchModel(path string) (local string, data []byte, err error) {
	if !storage.IsURL(path) {
		data, err := os.ReadFile(path)
		return path, data, err
	}
	store := storage.NewOpener()
	defer store.Close()
	data, err = store.ReadFile(context.Background(), path)
	if err != nil {
		return "", nil, err
	}
	_, name := storage.Split(path)
	f, err := os.CreateTemp("", "model-*-"+name)
	if err != nil {
		return "", nil, err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), data, nil
}

func release(loader, path string) {
	key := loader + "\x00" + path
	handlesMu.Lock()
	defer handlesMu.Unlock()
	if h := handles[key]; h != nil {
		if h.refs--; h.refs == 0 {
			delete(handles, key)
		}
	}
}

// timedModel adds up the time its sessions take to start, for one shard:
// what running sessions inside each bundle costs.
type timedModel struct {
	device.Model
	starting atomic.Int64 // nanoseconds
}

func (m *timedModel) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	began := time.Now()
	defer func() { m.starting.Add(int64(time.Since(began))) }()
	return m.Model.Start(ctx, cfg)
}
