package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drainpipe/drainpipe/predict"
)

// Repository is a folder of models in Triton's layout:
//
//	DIR/NAME/config.json          optional: version policy and batching
//	DIR/NAME/VERSION/model.EXT    VERSION a number, EXT what Load reads
//
// config.json holds {"version_policy": {"latest": N} | {"all": true} |
// {"specific": ["1", "3"]}, "batch_sizes": [1, 2, 4, 8], "max_delay":
// "2ms", "queue_rows": 4096, "timeout": "10s", "sessions": 2,
// "replicas": 1}, every field optional; the default policy serves the
// latest version.
type Repository struct {
	Dir string
	// Load makes the spec of one model file: its Model, Input, Platform,
	// and default Options and Batching, which the model's config.json
	// overrides. The server names it and sets its version.
	Load func(ctx context.Context, path string) (ModelSpec, error)
	// Poll, if set, rescans the folder this often (Triton's POLL mode): a
	// new model or version loads, one removed unloads, a changed file
	// reloads, and the repository API's load and unload are refused.
	// Zero is Triton's EXPLICIT mode: every model loads at start, then
	// changes only through the API's load and unload.
	Poll time.Duration
}

// WithRepository serves the models of a repository, besides the specs.
// A version is replaced without failing a request: the new one starts
// its sessions and runs its warm-up before it takes traffic; the old one
// answers what it has queued and in flight, then shuts its sessions down.
func WithRepository(r Repository) Option { return func(c *config) { c.repository = &r } }

// fileState identifies a model file's content, to tell when it changed.
type fileState struct {
	path string
	size int64
	mod  time.Time
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
	Timeout    duration `json:"timeout"`
	Sessions   int      `json:"sessions"`
	Replicas   int      `json:"replicas"`
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
		spec.Options = append(spec.Options, predict.WithBatchSizes(c.BatchSizes...))
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
	if c.Timeout != 0 {
		spec.Batching.Timeout = time.Duration(c.Timeout)
	}
}

// repository loads and unloads a Repository's models into a server.
type repository struct {
	Repository
	s *Server

	mu       sync.Mutex                   // one change at a time
	failed   map[string]map[string]string // the last load error, by name and version
	unloaded map[string]bool              // names unloaded by request (explicit mode)
}

func newRepository(r Repository, s *Server) *repository {
	return &repository{Repository: r, s: s, failed: map[string]map[string]string{}, unloaded: map[string]bool{}}
}

// scan returns the versions of a model the policy serves, with their
// files, and its config. A model folder that is not there serves none.
func (r *repository) scan(name string) (map[string]fileState, modelConfig, error) {
	var cfg modelConfig
	cfg.VersionPolicy.Latest = 1
	dir := filepath.Join(r.Dir, name)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cfg, nil
	}
	if err != nil {
		return nil, cfg, err
	}
	if data, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, cfg, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
		}
	}
	found := map[string]fileState{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := strconv.ParseUint(e.Name(), 10, 63); err != nil {
			continue // not a version folder
		}
		files, _ := filepath.Glob(filepath.Join(dir, e.Name(), "model.*"))
		if len(files) == 0 {
			continue
		}
		slices.Sort(files)
		st, err := os.Stat(files[0])
		if err != nil {
			continue // removed meanwhile
		}
		found[e.Name()] = fileState{path: files[0], size: st.Size(), mod: st.ModTime()}
	}
	versions := slices.SortedFunc(maps.Keys(found), compareVersions)
	keep := map[string]bool{}
	p := cfg.VersionPolicy
	switch {
	case p.All:
		for _, v := range versions {
			keep[v] = true
		}
	case len(p.Specific) > 0:
		for _, v := range p.Specific {
			keep[v] = true
		}
	default:
		for _, v := range versions[max(len(versions)-max(p.Latest, 1), 0):] {
			keep[v] = true
		}
	}
	maps.DeleteFunc(found, func(v string, _ fileState) bool { return !keep[v] })
	return found, cfg, nil
}

// names returns the model folders of the repository.
func (r *repository) names() ([]string, error) {
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// syncAll brings every model to what the folder holds: the models in it
// and the ones served from it that are gone. A model that fails to load
// is logged and listed in the index as unavailable, with its reason.
func (r *repository) syncAll(ctx context.Context) error {
	names, err := r.names()
	if err != nil {
		return fmt.Errorf("serve: model repository: %w", err)
	}
	for _, name := range r.s.reg.names() {
		if !slices.Contains(names, name) && !r.s.served[name] {
			names = append(names, name) // gone from the folder
		}
	}
	for _, name := range names {
		if r.s.served[name] {
			r.s.cfg.logger.Error("model repository: a model of this name is served already; its folder is passed over", "model", name)
			continue
		}
		if err := r.syncModel(ctx, name); err != nil {
			r.s.cfg.logger.Error("model repository: loading failed", "model", name, "error", err)
		}
	}
	return nil
}

// syncModel brings one model to what its folder holds: versions the
// policy serves start (or restart, if their file changed) and then take
// traffic; versions it no longer serves leave.
func (r *repository) syncModel(ctx context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	want, cfg, err := r.scan(name)
	if err != nil {
		r.failed[name] = map[string]string{"": err.Error()}
		return err
	}
	delete(r.failed, name)
	var errs []error
	for _, v := range slices.SortedFunc(maps.Keys(want), compareVersions) {
		file := want[v]
		if m, ok := r.s.reg.find(name, v, false); ok && m.source == file {
			continue
		}
		spec, err := r.Load(ctx, file.path)
		if err == nil {
			spec.Name, spec.Version = name, v
			cfg.apply(&spec)
			_, err = r.s.load(ctx, spec, file)
		}
		if err != nil {
			if r.failed[name] == nil {
				r.failed[name] = map[string]string{}
			}
			r.failed[name][v] = err.Error()
			errs = append(errs, fmt.Errorf("version %s: %w", v, err))
		}
	}
	for _, v := range r.s.reg.versions(name) {
		if _, ok := want[v]; !ok {
			r.s.unload(name, v)
		}
	}
	return errors.Join(errs...)
}

// unloadModel stops serving every version of a model.
func (r *repository) unloadModel(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.s.reg.versions(name) {
		r.s.unload(name, v)
	}
	delete(r.failed, name)
}

// poll rescans the folder every Poll until ctx ends (polling mode).
func (r *repository) poll(ctx context.Context) {
	if r.Poll <= 0 {
		return
	}
	t := time.NewTicker(r.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.syncAll(ctx)
		}
	}
}

// indexEntry is one model version of the repository index.
type indexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// index lists the repository's models: the versions served (READY), those
// that failed to load (UNAVAILABLE, with the reason), and models in the
// folder not loaded (no state).
func (r *repository) index(readyOnly bool) ([]indexEntry, error) {
	names, err := r.names()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []indexEntry
	for _, name := range names {
		versions := r.s.reg.versions(name)
		for _, v := range versions {
			out = append(out, indexEntry{Name: name, Version: v, State: "READY"})
		}
		for _, v := range slices.Sorted(maps.Keys(r.failed[name])) {
			if !readyOnly && !slices.Contains(versions, v) {
				out = append(out, indexEntry{Name: name, Version: v, State: "UNAVAILABLE", Reason: r.failed[name][v]})
			}
		}
		if len(versions) == 0 && len(r.failed[name]) == 0 && !readyOnly {
			out = append(out, indexEntry{Name: name})
		}
	}
	return out, nil
}
