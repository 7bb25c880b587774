//go:build onnx

package onnx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/drainpipe/drainpipe/device"
)

var (
	// ErrLibrary reports an ONNX Runtime library that cannot be found or loaded.
	ErrLibrary = errors.New("onnx: ONNX Runtime library unavailable")
	// ErrModel reports a model file that is missing or not a valid ONNX model.
	ErrModel = errors.New("onnx: bad model")
	// ErrMismatch reports a model whose inputs do not fit the batches.
	ErrMismatch = errors.New("onnx: model does not fit the input")
)

// LibraryEnv is the environment variable that may name the library.
const LibraryEnv = "DRAINPIPE_ONNXRUNTIME"

// Option configures a Model.
type Option func(*Model)

// WithLibrary sets the path of the ONNX Runtime shared library.
func WithLibrary(path string) Option { return func(m *Model) { m.library = path } }

// WithIntraOpThreads sets ONNX Runtime's intra-op thread count per
// session. The default, 0, leaves ONNX Runtime's own choice for a lone
// session and takes 1 when sessions or replicas run side by side.
func WithIntraOpThreads(n int) Option { return func(m *Model) { m.threads = n } }

// WithInput reads the model input named tensor from the Arrow column named
// column.
func WithInput(tensor, column string) Option {
	return func(m *Model) { m.columns[tensor] = column }
}

// Model is an ONNX model file opened for drainpipe.
type Model struct {
	path    string
	library string
	threads int
	columns map[string]string // input tensor name → column
	inputs  []ort.InputOutputInfo
	outputs []ort.InputOutputInfo
}

var _ device.Model = (*Model)(nil)

// Open reads an ONNX model's declared inputs and outputs.
func Open(path string, opts ...Option) (_ *Model, err error) {
	m := &Model{path: path, columns: map[string]string{}}
	for _, o := range opts {
		o(m)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	lib, err := m.libraryPath()
	if err != nil {
		return nil, err
	}
	if err := acquireEnv(lib); err != nil {
		return nil, err
	}
	defer func() {
		if rerr := releaseEnv(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	m.inputs, m.outputs, err = ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, path, err)
	}
	for _, io := range append(append([]ort.InputOutputInfo{}, m.inputs...), m.outputs...) {
		if io.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("%w: %s: %q is a %v, only tensors are supported", ErrModel, path, io.Name, io.OrtValueType)
		}
		if _, err := elemType(io.DataType); err != nil {
			return nil, fmt.Errorf("%w: %s: %q: %v", ErrModel, path, io.Name, err)
		}
		if len(io.Dimensions) == 0 {
			return nil, fmt.Errorf("%w: %s: %q has no batch dimension", ErrModel, path, io.Name)
		}
	}
	return m, nil
}

// Inputs returns the model's declared input names.
func (m *Model) Inputs() []string { return names(m.inputs) }

// Outputs returns the model's declared output names.
func (m *Model) Outputs() []string { return names(m.outputs) }

func names(ios []ort.InputOutputInfo) []string {
	out := make([]string, len(ios))
	for i, io := range ios {
		out[i] = io.Name
	}
	return out
}

// InputWidth returns the number of values per row of the named input.
func (m *Model) InputWidth(name string) (int, error) {
	for _, io := range m.inputs {
		if io.Name == name {
			return rowWidth(io.Dimensions)
		}
	}
	return 0, fmt.Errorf("%w: no input %q (the model has %v)", ErrMismatch, name, m.Inputs())
}

// column returns the Arrow column an input tensor reads.
func (m *Model) column(tensor string) string {
	if c, ok := m.columns[tensor]; ok {
		return c
	}
	return tensor
}

// BatchSizes returns the one batch size a model with a fixed batch
// dimension takes, or nil when the dimension is dynamic (device.BatchSizer).
func (m *Model) BatchSizes() []int {
	for _, io := range append(append([]ort.InputOutputInfo{}, m.inputs...), m.outputs...) {
		if d := io.Dimensions[0]; d > 0 {
			return []int{int(d)}
		}
	}
	return nil
}

// OutputSchema returns the schema of the model's predictions.
func (m *Model) OutputSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(m.outputs))
	for i, io := range m.outputs {
		dt, _ := elemType(io.DataType)
		width, _ := rowWidth(io.Dimensions)
		fields[i] = arrow.Field{Name: io.Name, Type: columnType(dt, io.Dimensions, width)}
	}
	return arrow.NewSchema(fields, nil)
}

func (m *Model) libraryPath() (string, error) {
	path := m.library
	if path == "" {
		path = os.Getenv(LibraryEnv)
	}
	if path == "" {
		path = findUp(filepath.Join(".onnxruntime", "libonnxruntime.so.1"))
	}
	if path == "" {
		return "", fmt.Errorf("%w: no library path (set %s, or run scripts/fetch-onnxruntime.sh)", ErrLibrary, LibraryEnv)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%w: %v (set %s, or run scripts/fetch-onnxruntime.sh)", ErrLibrary, err, LibraryEnv)
	}
	return path, nil
}

// DefaultLibrary returns the library path Open would use without
// WithLibrary, or "" if there is none.
func DefaultLibrary() string {
	m := &Model{}
	p, err := m.libraryPath()
	if err != nil {
		return ""
	}
	return p
}

// findUp looks for rel in the working folder and its parents.
func findUp(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// The ONNX Runtime environment is process-wide in onnxruntime_go, so the
// sessions share it: the first acquire creates it, the last release
// destroys it.
var env struct {
	sync.Mutex
	users   int
	library string
}

func acquireEnv(library string) error {
	env.Lock()
	defer env.Unlock()
	if env.users > 0 {
		if library != env.library {
			return fmt.Errorf("%w: already running %s, asked for %s", ErrLibrary, env.library, library)
		}
		env.users++
		return nil
	}
	ort.SetSharedLibraryPath(library)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLibrary, library, err)
	}
	if err := registerArena(); err != nil {
		return errors.Join(fmt.Errorf("%w: %s: the CPU arena: %v", ErrLibrary, library, err), ort.DestroyEnvironment())
	}
	env.users, env.library = 1, library
	return nil
}

// registerArena gives the environment a CPU arena that sessions asking
// for it (session.use_env_allocators) share. It grows by what is asked
// (kSameAsRequested), not by powers of two: a sequence model's many
// shapes then reuse one set of chunks, as large as the largest run's
// peak, instead of doubling past it.
func registerArena() error {
	cfg, err := ort.NewArenaCfgV2(map[string]int{"arena_extend_strategy": 1})
	if err != nil {
		return err
	}
	defer cfg.Destroy()
	info, err := ort.GetMemoryInfo()
	if err != nil {
		return err
	}
	return ort.CreateAndRegisterAllocator(info, cfg)
}

func releaseEnv() error {
	env.Lock()
	defer env.Unlock()
	env.users--
	if env.users > 0 {
		return nil
	}
	if err := ort.DestroyEnvironment(); err != nil {
		return fmt.Errorf("onnx: destroy environment: %w", err)
	}
	return nil
}

// Start implements device.Model: it checks the model against the batch
// schema and creates an ONNX Runtime session with its tensors.
func (m *Model) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	lib, err := m.libraryPath()
	if err != nil {
		return nil, err
	}
	if err := acquireEnv(lib); err != nil {
		return nil, err
	}
	s, err := newSession(m, cfg)
	if err != nil {
		return nil, errors.Join(err, releaseEnv())
	}
	return s, nil
}
