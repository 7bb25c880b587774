package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/drainpipe/drainpipe/storage"
)

// Repository is a folder of models in Triton's layout, on the local file
// system or on object storage (Dir an s3://, gs:// or azblob:// URL of a
// prefix ending in /, its driver imported by the program; folders are
// found by listing, a file's version is its size and ETag):
//
//	DIR/NAME/config.pbtxt         optional: Triton's model configuration
//	DIR/NAME/config.json          optional: version policy and batching
//	DIR/NAME/VERSION/model.EXT    VERSION a positive integer, model.EXT one of Files
//
// config.pbtxt is read as Triton writes it (text protobuf, Triton's field
// names): max_batch_size bounds every batch (the allowed sizes are
// dynamic_batching's preferred_batch_size and max_batch_size, or the
// powers of two up to it), max_queue_delay_microseconds is the batcher's
// delay (no dynamic_batching: none), default_queue_policy's
// max_queue_size and default_timeout_microseconds its queue bound (in
// requests) and timeout, instance_group's counts the session groups,
// version_policy the versions served, default_model_filename the file
// read, and the inputs and outputs it lists are checked against the
// model's (name, data_type, dims past the batch dimension), as the
// platform or backend against the file. A field drainpipe cannot honour
// (GPU instances, sequence batching, priorities, reshape, optimization,
// a platform it does not run) fails the load, naming it; parameters,
// which Triton's backends take as hints, are logged and not used.
//
// config.json holds {"version_policy": {"latest": N} | {"all": true} |
// {"specific": ["1", "3"]}, "batch_sizes": [1, 2, 4, 8], "max_delay":
// "2ms", "queue_rows": 4096, "queue_requests": 1000, "timeout": "10s", "sessions": 2,
// "replicas": 1}, every field optional; the default policy serves the
// latest version. What a config may ask for is bounded (batch sizes up to
// MaxBatchSize, sessions and replicas up to MaxSessions, queue rows up to
// MaxQueueRows): a config over a bound does not load. Beside a
// config.pbtxt, config.json sets what Triton has no field for (replicas);
// a field both set is refused.
//
// Version folders are positive integers written without leading zeros,
// as Triton's are; other names are passed over with a warning. Version
// and model folders that are symbolic links are followed. A model file is
// read only if it is a regular file of at most MaxFileBytes; in polling
// mode, only once it is stable (its size and time unchanged since the
// previous poll), so a file still being copied in is not loaded half
// written. A version that fails to load never retires the versions being
// served: they answer until one that loads takes their place, and the
// failure is in the index (UNAVAILABLE, with the reason), the log and
// the metrics; an unchanged file that failed is not read again.
type Repository struct {
	Dir string
	// Files are the model file names a version folder is read from, the
	// first found winning (default: model.dpmlp, model.onnx); other files
	// (model.json, a copy's model.onnx.tmp) are not models.
	Files []string
	// MaxFileBytes bounds a model file's size (default 8 GiB).
	MaxFileBytes int64
	// Load makes the spec of one model file: its Model, Input, Platform,
	// and default Options and Batching, which the model's config.json
	// overrides. The server names it and sets its version.
	Load func(ctx context.Context, path string) (ModelSpec, error)
	// LoadPinned, if set, loads a model file on object storage instead of
	// Load, told the version (size and ETag) the listing saw: a loader
	// that reads the file pinned to it (storage.Opener.Expect) loads the
	// version the index names, or fails (storage.ErrChanged) if it was
	// replaced since, to load at the next poll.
	LoadPinned func(ctx context.Context, path string, version storage.Info) (ModelSpec, error)
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

// fileState identifies a model file's content and its model's config,
// to tell when either changed.
type fileState struct {
	path   string
	size   int64
	mod    time.Time
	etag   string // an object's
	config string // config.json as read
}

// repository loads and unloads a Repository's models into a server.
type repository struct {
	Repository
	s  *Server
	fs repoFS

	// changing makes one change at a time: held through a model's scan
	// and loads, which may take minutes (a download, a warm-up). What
	// follows it is the changes' own state.
	changing sync.Mutex
	// failedFile is the file (and config) each failed version failed
	// with: not read again until it changes.
	failedFile map[string]map[string]fileState
	// seen is each version's file as the previous poll found it: a file
	// loads once two polls agree (it is not being written).
	seen map[string]map[string]fileState
	// warned is the folder names a warning was logged for, once each.
	warned map[string]bool

	// mu guards what readiness and the index read, held only to read or
	// replace it: never across a load, so a probe answers during one.
	mu     sync.Mutex
	failed map[string]map[string]string // the last load error, by name and version
}

func newRepository(r Repository, s *Server) *repository {
	if len(r.Files) == 0 {
		r.Files = defaultFiles
	}
	if r.MaxFileBytes <= 0 {
		r.MaxFileBytes = defaultMaxFileBytes
	}
	return &repository{Repository: r, s: s, fs: newRepoFS(r.Dir), failed: map[string]map[string]string{},
		failedFile: map[string]map[string]fileState{}, seen: map[string]map[string]fileState{}, warned: map[string]bool{}}
}

// warnOnce logs a warning about a folder entry once.
func (r *repository) warnOnce(path, msg string) {
	if !r.warned[path] {
		r.warned[path] = true
		r.s.cfg.logger.Warn("model repository: "+msg, "path", path)
	}
}

// modelFile returns a version folder's model file: the first of Files
// there, if it is a regular file of a bounded size.
func (r *repository) modelFile(ctx context.Context, dir, name string) (fileState, error) {
	files := r.Files
	if name != "" {
		files = []string{name} // config.pbtxt's default_model_filename
	}
	for _, name := range files {
		f, err := r.fs.file(ctx, r.fs.join(dir, name), r.MaxFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return f, err
	}
	return fileState{}, fs.ErrNotExist
}

// scan returns the versions of a model the policy serves, with their
// files, its config, and the versions whose folder holds no usable model
// file, with the reason. A model folder that is not there serves none.
func (r *repository) scan(ctx context.Context, name string) (map[string]fileState, modelConfig, map[string]error, error) {
	var cfg modelConfig
	cfg.VersionPolicy.Latest = 1
	dir := r.fs.join(r.Dir, name)
	versionDirs, exists, err := r.fs.dirs(ctx, dir)
	if err != nil || !exists {
		return nil, cfg, nil, err
	}
	config, err := r.readConfig(ctx, dir, name, &cfg)
	if err != nil {
		return nil, cfg, nil, err
	}
	found, bad := map[string]fileState{}, map[string]error{}
	for _, v := range versionDirs {
		path := r.fs.join(dir, v)
		if !versionName(v) {
			r.warnOnce(path, "a folder that is not a version (a positive integer without leading zeros) is passed over")
			continue
		}
		file, err := r.modelFile(ctx, path, cfg.triton.GetDefaultModelFilename())
		if errors.Is(err, fs.ErrNotExist) {
			continue // no model yet
		}
		if err != nil {
			bad[v] = err
			continue
		}
		file.config = config
		found[v] = file
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
	return found, cfg, bad, nil
}

// names returns the model folders of the repository.
func (r *repository) names(ctx context.Context) ([]string, error) {
	names, exists, err := r.fs.dirs(ctx, r.Dir)
	if err == nil && !exists && !storage.IsURL(r.Dir) {
		err = fmt.Errorf("%s: %w", r.Dir, fs.ErrNotExist)
	}
	return names, err
}

// syncAll brings every model to what the folder holds: the models in it
// and the ones served from it that are gone. A model that fails to load
// is logged and listed in the index as unavailable, with its reason.
func (r *repository) syncAll(ctx context.Context, polled bool) error {
	names, err := r.names(ctx)
	if err != nil {
		return fmt.Errorf("serve: model repository: %w", err)
	}
	for _, name := range r.s.reg.names() {
		if !slices.Contains(names, name) && !r.s.served[name] {
			names = append(names, name) // gone from the folder
		}
	}
	var errs []error
	for _, name := range names {
		if r.s.served[name] {
			r.s.cfg.logger.Error("model repository: a model of this name is served already; its folder is passed over", "model", name)
			continue
		}
		if err := r.syncModel(ctx, name, polled); err != nil {
			r.s.cfg.logger.Error("model repository: loading failed", "model", name, "error", err)
			errs = append(errs, fmt.Errorf("model %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// stillChanging is the index's reason for a file not yet loaded because
// the previous poll found it otherwise: not a failure.
const stillChanging = "the file is still changing: it loads once two polls find it the same"

// hasFailed reports a model whose last load failed.
func (r *repository) hasFailed(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failed[name]) > 0
}

// unserved returns a model of the repository that failed to load and
// serves no version, if there is one: the server is not ready while it is
// (Triton's strict readiness).
func (r *repository) unserved() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, failed := range r.failed {
		for _, reason := range failed {
			if reason != stillChanging && len(r.s.reg.versions(name)) == 0 {
				return name, true
			}
		}
	}
	return "", false
}

// syncModel brings one model to what its folder holds: versions the
// policy serves start (or restart, if their file or config changed) and
// then take traffic; versions it no longer serves leave — but only once
// every version it serves has loaded: a version that fails never retires
// the ones being served. polled marks a poll, which loads a file only
// once the previous poll saw it as it is.
//
// It holds r.changing throughout and r.mu only to record the outcome: the
// versions served until then answer, and readiness and the index read
// them, while new ones load.
func (r *repository) syncModel(ctx context.Context, name string, polled bool) error {
	r.changing.Lock()
	defer r.changing.Unlock()
	want, cfg, bad, err := r.scan(ctx, name)
	if err != nil {
		r.setFailed(name, map[string]string{"": err.Error()})
		r.s.metrics.loadFailed(name)
		return err
	}
	seen := r.seen[name]
	r.seen[name] = want
	failed := map[string]string{}
	var errs []error
	for v, err := range bad {
		failed[v] = err.Error()
		errs = append(errs, fmt.Errorf("version %s: %w", v, err))
	}
	for _, v := range slices.SortedFunc(maps.Keys(want), compareVersions) {
		file := want[v]
		if m, ok := r.s.reg.find(name, v, false); ok && m.source == file {
			continue
		}
		if polled && seen[v] != file {
			failed[v] = stillChanging
			continue
		}
		if r.failedFile[name][v] == file {
			failed[v] = r.failed[name][v] // failed as it is: not read again
			continue
		}
		spec, err := r.load(ctx, file)
		if err == nil && cfg.triton != nil {
			err = checkTriton(cfg.triton, file.path, spec)
		}
		if err == nil {
			spec.Name, spec.Version = name, v
			cfg.apply(&spec)
			spec.note = cfg.paddingNote(spec)
			_, err = r.s.load(ctx, spec, file)
		}
		if err != nil {
			failed[v] = err.Error()
			if r.failedFile[name] == nil {
				r.failedFile[name] = map[string]fileState{}
			}
			r.failedFile[name][v] = file
			r.s.metrics.loadFailed(name)
			errs = append(errs, fmt.Errorf("version %s: %w", v, err))
			continue
		}
		delete(r.failedFile[name], v)
	}
	r.setFailed(name, failed)
	for _, v := range r.s.reg.versions(name) {
		if _, ok := want[v]; ok {
			continue
		}
		if pending := len(failed) > 0; pending {
			r.s.cfg.logger.Warn("model repository: a version no longer wanted is kept while others are not ready", "model", name, "version", v)
			continue
		}
		r.s.unload(name, v)
	}
	return errors.Join(errs...)
}

// load makes the spec of a version's file: pinned to the version the
// listing saw where the loader can be (LoadPinned, an object).
func (r *repository) load(ctx context.Context, file fileState) (ModelSpec, error) {
	if r.LoadPinned != nil && file.etag != "" {
		return r.LoadPinned(ctx, file.path, storage.Info{Size: file.size, ETag: file.etag})
	}
	return r.Load(ctx, file.path)
}

// unloadModel stops serving every version of a model.
func (r *repository) unloadModel(name string) {
	r.changing.Lock()
	defer r.changing.Unlock()
	for _, v := range r.s.reg.versions(name) {
		r.s.unload(name, v)
	}
	r.setFailed(name, nil)
}

// setFailed records a model's failed versions (none: nil).
func (r *repository) setFailed(name string, failed map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(failed) == 0 {
		delete(r.failed, name)
		return
	}
	r.failed[name] = failed
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
			r.syncAll(ctx, true)
		}
	}
}
