package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/serve/tritonpb"
)

// Bounds on what a model's config.json may ask the server to allocate.
const (
	MaxBatchSize = 1 << 16
	MaxSessions  = 256
	MaxQueueRows = 1 << 22
)

// defaultFiles are the model file names of the formats drainpipe loads.
var defaultFiles = []string{"model.dpmlp", "model.onnx"}

// defaultMaxFileBytes bounds a model file's size by default.
const defaultMaxFileBytes = 8 << 30

// check refuses a config that asks for more than the bounds.
func (c modelConfig) check() error {
	for _, b := range c.BatchSizes {
		if b < 1 || b > MaxBatchSize {
			return fmt.Errorf("batch_sizes: %d, want 1 to %d", b, MaxBatchSize)
		}
	}
	switch {
	case c.Sessions < 0 || c.Sessions > MaxSessions:
		return fmt.Errorf("sessions: %d, want 0 to %d", c.Sessions, MaxSessions)
	case c.Replicas < 0 || c.Replicas > MaxSessions:
		return fmt.Errorf("replicas: %d, want 0 to %d", c.Replicas, MaxSessions)
	case c.QueueRows < 0 || c.QueueRows > MaxQueueRows:
		return fmt.Errorf("queue_rows: %d, want 0 to %d", c.QueueRows, MaxQueueRows)
	case c.QueueRequests < 0 || c.QueueRequests > MaxQueueRows:
		return fmt.Errorf("queue_requests: %d, want 0 to %d", c.QueueRequests, MaxQueueRows)
	case c.VersionPolicy.Latest < 0:
		return fmt.Errorf("version_policy.latest: %d, want 1 or more", c.VersionPolicy.Latest)
	}
	for _, v := range c.VersionPolicy.Specific {
		if !versionName(v) {
			return fmt.Errorf("version_policy.specific: %q is not a version (a positive integer)", v)
		}
	}
	return nil
}

// versionName reports whether a folder name is a version: a positive
// integer without leading zeros that fits in 63 bits (Triton's rule).
func versionName(name string) bool {
	if name == "" || name[0] < '1' || name[0] > '9' {
		return false
	}
	_, err := strconv.ParseUint(name, 10, 63)
	return err == nil
}

// modelConfig is a model's config.json.
type modelConfig struct {
	VersionPolicy struct {
		Latest   int      `json:"latest"`
		All      bool     `json:"all"`
		Specific []string `json:"specific"`
	} `json:"version_policy"`
	BatchSizes []int    `json:"batch_sizes"`
	MaxDelay   duration `json:"max_delay"`
	QueueRows  int      `json:"queue_rows"`
	// QueueRequests is Triton's max_queue_size, in requests.
	QueueRequests int      `json:"queue_requests"`
	Timeout       duration `json:"timeout"`
	Sessions      int      `json:"sessions"`
	Replicas      int      `json:"replicas"`

	// triton is the model's config.pbtxt, if it has one: a loaded model
	// is checked against it.
	triton *tritonpb.ModelConfig
}

// duration is a JSON string such as "2ms".
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration such as \"2ms\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

// apply sets the config's batching on a spec.
func (c modelConfig) apply(spec *ModelSpec) {
	if len(c.BatchSizes) > 0 {
		// The largest is the batch size, whatever the model's loader said.
		spec.Options = append(spec.Options, predict.WithBatchSize(c.BatchSizes[len(c.BatchSizes)-1]), predict.WithBatchSizes(c.BatchSizes...))
	}
	if c.Sessions > 0 {
		spec.Options = append(spec.Options, predict.WithGroups(c.Sessions))
	}
	if c.Replicas > 0 {
		spec.Options = append(spec.Options, predict.WithReplicas(c.Replicas))
	}
	if c.MaxDelay != 0 {
		spec.Batching.MaxDelay = time.Duration(c.MaxDelay)
	}
	if c.QueueRows > 0 {
		spec.Batching.QueueRows = c.QueueRows
	}
	if c.QueueRequests > 0 {
		spec.Batching.QueueRequests = c.QueueRequests
	}
	if c.Timeout != 0 {
		spec.Batching.Timeout = time.Duration(c.Timeout)
	}
}

// firstFew joins the first n of names, and says how many more there are.
func firstFew(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// readConfig reads a model folder's config.pbtxt (Triton's) and
// config.json (drainpipe's, for what Triton has no field for) into cfg,
// and returns their text, to tell when either changes.
func (r *repository) readConfig(ctx context.Context, dir, name string, cfg *modelConfig) (string, error) {
	var text strings.Builder
	pbtxt := r.fs.join(dir, tritonConfigFile)
	if data, err := r.fs.read(ctx, pbtxt, 1<<20); err == nil {
		text.Write(data)
		policy := cfg.VersionPolicy
		var unused []string
		if *cfg, unused, err = parseTriton(data, name); err != nil {
			return "", fmt.Errorf("%s: %w", pbtxt, err)
		}
		if len(unused) > 0 {
			// Once for each version of the file, not on every poll.
			r.warnOnce(fmt.Sprintf("%s@%x", pbtxt, sha256.Sum256(data)), fmt.Sprintf("config.pbtxt parameters not used by drainpipe: %d (%s)", len(unused), firstFew(unused, 8)))
		}
		if cfg.VersionPolicy.Latest == 0 && !cfg.VersionPolicy.All && len(cfg.VersionPolicy.Specific) == 0 {
			cfg.VersionPolicy = policy
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	path := r.fs.join(dir, "config.json")
	data, err := r.fs.read(ctx, path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return text.String(), nil
	}
	if err != nil {
		return "", err
	}
	text.WriteString("\n")
	text.Write(data)
	var j modelConfig
	j.VersionPolicy = cfg.VersionPolicy
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if cfg.triton == nil {
		*cfg = j
	} else {
		var set map[string]json.RawMessage
		json.Unmarshal(data, &set)
		fields := map[string]bool{}
		for k := range set {
			fields[k] = true
		}
		if err := cfg.merge(j, fields); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := cfg.check(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return text.String(), nil
}
