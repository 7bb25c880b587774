package serve

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve/tritonpb"
)

// tritonRepository is a repository of MLPs (a model file holds its seed),
// each with the config.pbtxt given, served at batch size 256 unless the
// config says otherwise.
func tritonRepository(t *testing.T, configs map[string]string) Repository {
	dir := t.TempDir()
	for name, config := range configs {
		if err := os.MkdirAll(filepath.Join(dir, name, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "1", "model.seed"), "7")
		writeFile(t, filepath.Join(dir, name, "config.pbtxt"), config)
	}
	mem := arrowtest.Allocator(t)
	return Repository{Dir: dir, Files: []string{"model.seed"}, Load: func(_ context.Context, path string) (ModelSpec, error) {
		data, _ := os.ReadFile(path)
		seed, _ := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		m, err := cpu.NewMLP([]int{features, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			return ModelSpec{}, err
		}
		return ModelSpec{Model: m, Input: mlpInput(),
			Options:  []predict.Option{predict.WithBatchSize(256), predict.WithAllocator(mem)},
			Batching: online.Options{MaxDelay: time.Millisecond}}, nil
	}}
}

// A configuration as Triton's documentation writes one: max_batch_size
// bounds every batch (a 40-row request runs in batches of at most 4),
// instance_group's count is the session groups, the dynamic batcher's
// delay and queue policy are the online batcher's, and the inputs and
// outputs it lists are checked against the model's.
func TestTritonConfig(t *testing.T) {
	repo := tritonRepository(t, map[string]string{"classifier": `
name: "classifier"
max_batch_size: 4
input [
  {
    name: "features"
    data_type: TYPE_FP32
    dims: [ 8 ]
  }
]
output [
  {
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ 3 ]
  },
  {
    name: "class"
    data_type: TYPE_INT64
    dims: [ 1 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 500
  default_queue_policy {
    timeout_action: REJECT
    default_timeout_microseconds: 5000000
    max_queue_size: 1000
  }
}
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
version_policy: { latest: { num_versions: 1 } }
parameters: {
  key: "intra_op_thread_count"
  value: { string_value: "1" }
}
`})
	var starts atomic.Int32
	load := repo.Load
	repo.Load = func(ctx context.Context, path string) (ModelSpec, error) {
		spec, err := load(ctx, path)
		if err == nil {
			spec.Model = startCounter{MLP: spec.Model.(*cpu.MLP), starts: &starts}
		}
		return spec, err
	}
	r := serveTest(t, nil, WithRepository(repo))
	// The MLP's device takes static shapes: a 1-row batch runs as 2.
	if got := r.indexText(t); got != "classifier 1 READY batches padded to [2 4] rows (preferred_batch_size and max_batch_size): the device takes static shapes" {
		t.Fatalf("index: %s", got)
	}
	if n := starts.Load(); n != 2 {
		t.Fatalf("%d sessions started, want instance_group's 2", n)
	}
	code, body := r.do(t, "POST", "/v2/models/classifier/infer", inferBody(rows(0, 40), false, nil), nil)
	if code != 200 {
		t.Fatalf("infer: %d %s", code, body)
	}
	checkBatchesWithin(t, r, "classifier", 4)

	// The dynamic batcher's delay and queue policy are the online
	// batcher's: max_queue_size in requests, as Triton counts them.
	data, err := os.ReadFile(filepath.Join(repo.Dir, "classifier", "config.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseTriton(data, "classifier")
	if err != nil {
		t.Fatal(err)
	}
	var spec ModelSpec
	cfg.apply(&spec)
	want := online.Options{MaxDelay: 500 * time.Microsecond, QueueRequests: 1000, Timeout: 5 * time.Second}
	if spec.Batching != want {
		t.Fatalf("batching %+v, want %+v", spec.Batching, want)
	}
}

// startCounter counts an MLP's sessions, its output schema kept for the
// config's check.
type startCounter struct {
	*cpu.MLP
	starts *atomic.Int32
}

func (c startCounter) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	c.starts.Add(1)
	return c.MLP.Start(ctx, cfg)
}

// checkBatchesWithin fails the test unless every batch model ran (as
// /metrics counts them) had at most max rows.
func checkBatchesWithin(t *testing.T, r *running, model string, max int) {
	t.Helper()
	_, metrics := r.do(t, "GET", "/metrics", nil, nil)
	count := regexp.MustCompile(`drainpipe_batch_size_rows_count\{model="` + model + `"\} (\d+)`).FindSubmatch(metrics)
	within := regexp.MustCompile(`drainpipe_batch_size_rows_bucket\{model="` + model + `",le="` + strconv.Itoa(max) + `"\} (\d+)`).FindSubmatch(metrics)
	if count == nil || within == nil || string(count[1]) != string(within[1]) || string(count[1]) == "0" {
		t.Fatalf("batches over %d rows:\n%s", max, metrics)
	}
}

// A field drainpipe cannot honour fails the load, naming it.
func TestTritonConfigRefusals(t *testing.T) {
	for name, c := range map[string]struct{ config, want string }{
		"gpu":       {"max_batch_size: 8\ninstance_group [ { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]", "instance_group[0]: GPU"},
		"sequence":  {"max_batch_size: 8\nsequence_batching { }", "sequence_batching"},
		"optimize":  {"max_batch_size: 8\noptimization { execution_accelerators { cpu_execution_accelerator: [ { name: \"openvino\" } ] } }", "optimization"},
		"nobatch":   {"max_batch_size: 0", "max_batch_size: 0"},
		"dtype":     {"max_batch_size: 8\ninput [ { name: \"features\" data_type: TYPE_FP16 dims: [ 8 ] } ]", "data_type TYPE_FP16"},
		"dims":      {"max_batch_size: 8\ninput [ { name: \"features\" data_type: TYPE_FP32 dims: [ 9 ] } ]", "dims [9]"},
		"noinput":   {"max_batch_size: 8\ninput [ { name: \"pixels\" data_type: TYPE_FP32 dims: [ 8 ] } ]", `input "pixels": the model has no such input`},
		"tensorrt":  {"platform: \"tensorrt_plan\"\nmax_batch_size: 8", `platform: "tensorrt_plan"`},
		"onnx":      {"platform: \"onnxruntime_onnx\"\nmax_batch_size: 8", `platform: "onnxruntime_onnx", but the model file is`},
		"name":      {"name: \"other\"\nmax_batch_size: 8", `name: "other"`},
		"priority":  {"max_batch_size: 8\ndynamic_batching { priority_levels: 2 }", "priority_levels"},
		"delay":     {"max_batch_size: 8\ndynamic_batching { default_queue_policy { timeout_action: DELAY } }", "timeout_action: DELAY"},
		"preferred": {"max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 16 ] }", "preferred_batch_size: 16"},
	} {
		t.Run(name, func(t *testing.T) {
			repo := tritonRepository(t, map[string]string{name: c.config})
			r := serveTest(t, nil, WithRepository(repo), WithExitOnError(false))
			if got := r.indexText(t); !strings.Contains(got, "UNAVAILABLE") || !strings.Contains(got, c.want) {
				t.Fatalf("index: %s\nwant a failure naming %q", got, c.want)
			}
		})
	}
}

// config.json stays for what Triton has no field for (replicas); a field
// both files set is refused.
func TestTritonConfigWithConfigJSON(t *testing.T) {
	repo := tritonRepository(t, map[string]string{"a": "max_batch_size: 8", "b": "max_batch_size: 8"})
	writeFile(t, filepath.Join(repo.Dir, "a", "config.json"), `{"replicas": 2}`)
	writeFile(t, filepath.Join(repo.Dir, "b", "config.json"), `{"batch_sizes": [16]}`)
	r := serveTest(t, nil, WithRepository(repo), WithExitOnError(false))
	got := r.indexText(t)
	if !strings.Contains(got, "a 1 READY") || !strings.Contains(got, "config.json sets batch_sizes, which config.pbtxt sets too") {
		t.Fatalf("index: %s", got)
	}
}

// A dimension the model leaves open may be stated in the config, as
// Triton allows; a stated one must match.
func TestTritonDimsStatedConcretely(t *testing.T) {
	have := []TensorMetadata{{Name: "input_ids", Datatype: "INT64", Shape: []int64{-1, -1}}, {Name: "features", Datatype: "FP32", Shape: []int64{-1, 8}}}
	for _, c := range []struct {
		name string
		dims []int64
		ok   bool
	}{
		{"input_ids", []int64{128}, true},
		{"input_ids", []int64{-1}, true},
		{"features", []int64{8}, true},
		{"features", []int64{-1}, false},
		{"features", []int64{9}, false},
	} {
		err := matchTensor("input", c.name, tritonpb.DataType_TYPE_FP32, c.dims, have)
		if c.name == "input_ids" {
			err = matchTensor("input", c.name, tritonpb.DataType_TYPE_INT64, c.dims, have)
		}
		if (err == nil) != c.ok {
			t.Errorf("%s dims %v: %v, want accepted %t", c.name, c.dims, err, c.ok)
		}
	}
}

// Parameters of a config.pbtxt that drainpipe does not use are one
// warning for each version of the file, however many there are and
// however often the repository is polled: 5,000 of them once made
// 5,000 lines a poll.
func TestUnusedParametersWarnedOnce(t *testing.T) {
	var config strings.Builder
	config.WriteString("name: \"m\"\nmax_batch_size: 8\n")
	for i := range 5000 {
		fmt.Fprintf(&config, "parameters { key: \"p%04d\" value: { string_value: \"x\" } }\n", i)
	}
	repo := tritonRepository(t, map[string]string{"m": config.String()})
	repo.Poll = 5 * time.Millisecond
	var log syncBuffer
	r := serveTest(t, nil, WithRepository(repo), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	// Each poll reads the config again: 40 polls' time.
	polled := func(n int) { time.Sleep(time.Duration(n) * repo.Poll) }
	polled(40)
	if got := strings.Count(log.String(), "not used by drainpipe"); got != 1 {
		t.Fatalf("%d warnings, want 1:\n%.2000s", got, log.String())
	}
	if !strings.Contains(log.String(), "parameters not used by drainpipe: 5000 (p0000, p0001") {
		t.Errorf("the warning does not count and name them:\n%.1000s", log.String())
	}
	// Another version of the file is warned about once more.
	writeFile(t, filepath.Join(repo.Dir, "m", "config.pbtxt"), "name: \"m\"\nmax_batch_size: 8\nparameters { key: \"other\" value: { string_value: \"x\" } }\n")
	polled(40)
	if got := strings.Count(log.String(), "not used by drainpipe"); got != 2 {
		t.Fatalf("%d warnings after the change, want 2", got)
	}
	if got := r.indexText(t); !strings.Contains(got, "m 1 READY") {
		t.Errorf("index: %s", got)
	}
}
