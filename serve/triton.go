package serve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/serve/tritonpb"
)

// A model folder's config.pbtxt is Triton's model configuration. Each
// field drainpipe reads is mapped onto its batching, sessions and checks;
// a field it cannot honour is an error naming it (the parser refuses the
// fields it does not know at all), and backend parameters, which Triton's
// backends treat as hints, are a warning.

// tritonConfigFile is the name Triton reads a model's configuration from.
const tritonConfigFile = "config.pbtxt"

// supportedPlatforms are the Triton platforms and backends drainpipe
// runs, with the model file each loads.
var supportedPlatforms = map[string]string{
	"onnxruntime_onnx": ".onnx", "onnxruntime": ".onnx",
	"drainpipe": "", "drainpipe_mlp": ".dpmlp",
}

// parseTriton reads a config.pbtxt into the repository's modelConfig, and
// keeps the parsed message for the checks a loaded model is held to. It
// returns the names of the parameters drainpipe does not use, sorted.
func parseTriton(data []byte, folder string) (cfg modelConfig, unused []string, err error) {
	var tc tritonpb.ModelConfig
	if err := prototext.Unmarshal(data, &tc); err != nil {
		return cfg, nil, fmt.Errorf("%w (the fields drainpipe reads: name, platform, backend, max_batch_size, input, output, dynamic_batching, instance_group, version_policy, default_model_filename, parameters)", err)
	}
	if tc.Name != "" && tc.Name != folder {
		return cfg, nil, fmt.Errorf("name: %q, but the model's folder is %q (Triton requires them equal)", tc.Name, folder)
	}
	for _, p := range []struct{ field, value string }{{"platform", tc.Platform}, {"backend", tc.Backend}} {
		if _, ok := supportedPlatforms[p.value]; p.value != "" && !ok {
			return cfg, nil, fmt.Errorf("%s: %q: drainpipe runs ONNX models (onnxruntime_onnx, onnxruntime) and its own MLPs", p.field, p.value)
		}
	}
	switch mb := tc.MaxBatchSize; {
	case mb <= 0:
		return cfg, nil, fmt.Errorf("max_batch_size: %d: a model without a batch dimension is not supported (drainpipe batches rows)", mb)
	case mb > MaxBatchSize:
		return cfg, nil, fmt.Errorf("max_batch_size: %d, want 1 to %d", mb, MaxBatchSize)
	}
	cfg.BatchSizes = batchSizes(int(tc.MaxBatchSize), nil)
	cfg.MaxDelay = duration(online.NoDelay) // no dynamic batcher: queued rows run at once
	if db := tc.DynamicBatching; db != nil {
		for _, b := range db.PreferredBatchSize {
			if b < 1 || b > tc.MaxBatchSize {
				return cfg, nil, fmt.Errorf("dynamic_batching.preferred_batch_size: %d, want 1 to max_batch_size %d", b, tc.MaxBatchSize)
			}
		}
		cfg.BatchSizes = batchSizes(int(tc.MaxBatchSize), db.PreferredBatchSize)
		if db.MaxQueueDelayMicroseconds > 0 {
			cfg.MaxDelay = duration(time.Duration(min(db.MaxQueueDelayMicroseconds, uint64(time.Hour/time.Microsecond))) * time.Microsecond)
		}
		if db.PriorityLevels > 0 || db.DefaultPriorityLevel > 0 {
			return cfg, nil, fmt.Errorf("dynamic_batching.priority_levels: priority queues are not supported")
		}
		if q := db.DefaultQueuePolicy; q != nil {
			if q.TimeoutAction == tritonpb.ModelQueuePolicy_DELAY {
				return cfg, nil, fmt.Errorf("dynamic_batching.default_queue_policy.timeout_action: DELAY is not supported (a request past its timeout is rejected)")
			}
			if q.MaxQueueSize > MaxQueueRows {
				return cfg, nil, fmt.Errorf("dynamic_batching.default_queue_policy.max_queue_size: %d, want at most %d", q.MaxQueueSize, MaxQueueRows)
			}
			cfg.QueueRequests = int(q.MaxQueueSize) // requests, as Triton counts them
			cfg.Timeout = duration(time.Duration(min(q.DefaultTimeoutMicroseconds, uint64(time.Hour/time.Microsecond))) * time.Microsecond)
		}
	}
	for i, g := range tc.InstanceGroup {
		if g.Kind == tritonpb.ModelInstanceGroup_KIND_GPU || len(g.Gpus) > 0 {
			return cfg, nil, fmt.Errorf("instance_group[%d]: GPU instances: this server runs on the CPU", i)
		}
		if g.Kind == tritonpb.ModelInstanceGroup_KIND_MODEL {
			return cfg, nil, fmt.Errorf("instance_group[%d]: KIND_MODEL is not supported (use KIND_CPU)", i)
		}
		cfg.Sessions += max(int(g.Count), 1) // Triton's default count is 1
	}
	if p := tc.VersionPolicy; p != nil {
		switch {
		case p.GetLatest() != nil:
			cfg.VersionPolicy.Latest = int(max(p.GetLatest().NumVersions, 1))
		case p.GetAll() != nil:
			cfg.VersionPolicy.All = true
		case p.GetSpecific() != nil:
			for _, v := range p.GetSpecific().Versions {
				cfg.VersionPolicy.Specific = append(cfg.VersionPolicy.Specific, strconv.FormatInt(v, 10))
			}
		}
	}
	for _, in := range tc.Input {
		switch {
		case in.Reshape != nil:
			return cfg, nil, fmt.Errorf("input %q: reshape is not supported", in.Name)
		case in.Optional:
			return cfg, nil, fmt.Errorf("input %q: optional inputs are not supported", in.Name)
		case in.AllowRaggedBatch:
			return cfg, nil, fmt.Errorf("input %q: allow_ragged_batch is not supported", in.Name)
		}
	}
	for _, out := range tc.Output {
		switch {
		case out.Reshape != nil:
			return cfg, nil, fmt.Errorf("output %q: reshape is not supported", out.Name)
		case out.LabelFilename != "":
			return cfg, nil, fmt.Errorf("output %q: label_filename is not supported", out.Name)
		}
	}
	unused = slices.Sorted(maps.Keys(tc.Parameters))
	cfg.triton = &tc
	if tc.DefaultModelFilename != "" {
		if strings.ContainsAny(tc.DefaultModelFilename, `/\`) || strings.HasPrefix(tc.DefaultModelFilename, ".") {
			return cfg, nil, fmt.Errorf("default_model_filename: %q is not a file name", tc.DefaultModelFilename)
		}
	}
	return cfg, unused, cfg.check()
}

// batchSizes returns the batch sizes a Triton model is run at: its
// preferred sizes and max_batch_size, or without preferred sizes the
// powers of two below max_batch_size and max_batch_size (a batch is
// padded to the smallest that holds it).
func batchSizes(maxBatch int, preferred []int32) []int {
	var out []int
	if len(preferred) == 0 {
		for b := 1; b < maxBatch; b *= 2 {
			out = append(out, b)
		}
	}
	for _, b := range preferred {
		out = append(out, int(b))
	}
	out = append(out, maxBatch)
	slices.Sort(out)
	return slices.Compact(out)
}

// paddingNote says how a config.pbtxt's preferred batch sizes are run
// when they are not run as Triton does. Triton takes them as targets and
// runs what is queued at the delay's end unpadded; a model that takes
// short batches (device.ShortBatcher) is run so too, but one whose device
// takes static shapes is padded to the smallest allowed size: said in
// the index, or "" where there is nothing to say.
func (c modelConfig) paddingNote(spec ModelSpec) string {
	if c.triton == nil || len(c.triton.GetDynamicBatching().GetPreferredBatchSize()) == 0 {
		return ""
	}
	if sb, ok := spec.Model.(device.ShortBatcher); ok && sb.ShortBatches() {
		return ""
	}
	return fmt.Sprintf("batches padded to %v rows (preferred_batch_size and max_batch_size): the device takes static shapes", c.BatchSizes)
}

// tritonDatatype is the Open Inference Protocol's name of a Triton data
// type (TYPE_FP32 → FP32; TYPE_STRING → BYTES).
func tritonDatatype(t tritonpb.DataType) string {
	if t == tritonpb.DataType_TYPE_STRING {
		return "BYTES"
	}
	return strings.TrimPrefix(t.String(), "TYPE_")
}

// checkTriton holds a loaded model to its config.pbtxt: the platform its
// file is for, and every input and output the config lists, by name,
// data type and dims (past the batch dimension).
func checkTriton(tc *tritonpb.ModelConfig, file string, spec ModelSpec) error {
	for _, p := range []struct{ field, value string }{{"platform", tc.Platform}, {"backend", tc.Backend}} {
		if ext := supportedPlatforms[p.value]; ext != "" && !strings.HasSuffix(file, ext) {
			return fmt.Errorf("config.pbtxt %s: %q, but the model file is %s", p.field, p.value, file)
		}
	}
	var ins []TensorMetadata
	for _, f := range spec.Input.Fields() {
		md, err := metadata(f)
		if err != nil {
			return err
		}
		ins = append(ins, md)
	}
	if len(tc.Input) > 0 && len(tc.Input) != len(ins) {
		return fmt.Errorf("config.pbtxt lists %d inputs, the model takes %s", len(tc.Input), names(ins))
	}
	for _, in := range tc.Input {
		if err := matchTensor("input", in.Name, in.DataType, in.Dims, ins); err != nil {
			return err
		}
	}
	if len(tc.Output) == 0 {
		return nil
	}
	o, ok := spec.Model.(device.OutputSchemaer)
	if !ok {
		return fmt.Errorf("config.pbtxt lists outputs, and the model does not state its own to check them against")
	}
	var outs []TensorMetadata
	for _, f := range o.OutputSchema().Fields() {
		if md, err := metadata(f); err == nil {
			outs = append(outs, md)
		}
	}
	for _, out := range tc.Output {
		if err := matchTensor("output", out.Name, out.DataType, out.Dims, outs); err != nil {
			return err
		}
	}
	return nil
}

// matchTensor checks one tensor a config lists against the model's.
func matchTensor(kind, name string, dt tritonpb.DataType, dims []int64, have []TensorMetadata) error {
	i := slices.IndexFunc(have, func(t TensorMetadata) bool { return t.Name == name })
	if i < 0 {
		return fmt.Errorf("config.pbtxt %s %q: the model has no such %s (it has %s)", kind, name, kind, names(have))
	}
	t := have[i]
	if got := tritonDatatype(dt); got != t.Datatype {
		return fmt.Errorf("config.pbtxt %s %q: data_type %s, the model's is TYPE_%s", kind, name, dt, strings.Replace(t.Datatype, "BYTES", "STRING", 1))
	}
	want := t.Shape[1:]
	if len(want) == 0 {
		want = []int64{1} // Triton writes a scalar a row as dims [1]
	}
	// A dimension the model leaves open (-1) may be stated in the config,
	// as Triton allows.
	if !slices.EqualFunc(dims, want, func(a, b int64) bool { return a == b || b == -1 }) {
		return fmt.Errorf("config.pbtxt %s %q: dims %v, the model's are %v (past the batch dimension)", kind, name, dims, want)
	}
	return nil
}

// merge takes the fields config.json sets onto a config.pbtxt's: for
// what Triton has no field for (replicas); a field both set is an error.
func (c *modelConfig) merge(j modelConfig, set map[string]bool) error {
	for field, both := range map[string]bool{
		"version_policy": set["version_policy"] && c.triton.VersionPolicy != nil,
		"batch_sizes":    set["batch_sizes"],
		"max_delay":      set["max_delay"] && c.triton.DynamicBatching != nil,
		"queue_requests": set["queue_requests"] && c.triton.GetDynamicBatching().GetDefaultQueuePolicy() != nil,
		"timeout":        set["timeout"] && c.triton.GetDynamicBatching().GetDefaultQueuePolicy() != nil,
		"sessions":       set["sessions"] && len(c.triton.InstanceGroup) > 0,
	} {
		if both {
			return fmt.Errorf("config.json sets %s, which config.pbtxt sets too: set it in one", field)
		}
	}
	if set["version_policy"] {
		c.VersionPolicy = j.VersionPolicy
	}
	if set["max_delay"] {
		c.MaxDelay = j.MaxDelay
	}
	if set["queue_rows"] {
		c.QueueRows = j.QueueRows
	}
	if set["queue_requests"] {
		c.QueueRequests = j.QueueRequests
	}
	if set["timeout"] {
		c.Timeout = j.Timeout
	}
	if set["sessions"] {
		c.Sessions = j.Sessions
	}
	c.Replicas = j.Replicas
	if c.Replicas > 1 {
		// Each batch is split between the replicas: only sizes that
		// divide by them.
		c.BatchSizes = slices.DeleteFunc(c.BatchSizes, func(b int) bool { return b%c.Replicas != 0 })
		if len(c.BatchSizes) == 0 {
			return fmt.Errorf("replicas: %d: config.pbtxt's max_batch_size %d does not divide by them", c.Replicas, c.triton.MaxBatchSize)
		}
	}
	return c.check()
}
