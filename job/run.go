package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// Run runs the job to completion, or until ctx is cancelled or a step
// fails; the parts written so far then stay for a resume.
//
// The output is a file (.parquet, .arrow, .arrows), written once every
// part is done by merging them; or a folder ([IsFolder]) that holds the
// parts themselves as Parquet files (part-00000.parquet, …), the manifest
// (_manifest.json), and a _SUCCESS marker written last, as Spark, Hive and
// Beam write datasets: no merge, no second write.
func Run(ctx context.Context, cfg Config) (sum *Summary, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, span := cfg.startJob(ctx, "job")
	defer func() { endSpan(span, err) }()
	cfg.openStore()
	defer cfg.store.Close()
	r := &run{cfg: &cfg, began: time.Now()}
	tidy, stop := graceful(ctx, cleanupGrace)
	defer stop()
	r.tidy = tidy
	held, err := r.prepare(ctx)
	if held != nil {
		defer func() {
			// A release of its own: the run's tidying may have used up
			// its grace against a store that stopped answering.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupGrace)
			defer cancel()
			if rerr := held.release(rctx); rerr != nil {
				if err == nil {
					rerr = fmt.Errorf("the output is complete, but %w", rerr)
				}
				err = errors.Join(err, rerr)
			}
		}()
	}
	if errors.Is(err, errFinished) {
		// A run killed after its output was complete: resuming it only
		// tidies up.
		rows, ok := finished(r.layout, r.fingerprint)
		if !ok || !r.layout.folder {
			// The output file names its job, and holds its rows (the parts,
			// if any, may be a later, interrupted run's of the same job).
			rows = outputRows(cfg.store, cfg.Output)
		}
		return &Summary{Output: cfg.Output, Rows: rows, RowsIn: rows, ResumedRows: rows, AlreadyComplete: true, Wall: time.Since(r.began)}, nil
	}
	if err != nil {
		return nil, err
	}
	sum, err = r.predict(ctx)
	if err == nil {
		err = r.complete(sum)
	}
	if err != nil {
		if len(r.parts.m.Parts) == 0 && r.parts.fenced() == nil {
			// A run that failed before its first part leaves nothing to
			// resume; one whose output another run took leaves that run's.
			r.parts.clear()
		}
		return nil, err
	}
	return sum, nil
}

// cleanupGrace is how long the work a cancelled run still does in order
// (its manifest, its lock's release) may take past the cancellation: a
// store that stops answering cannot hold the run forever.
var cleanupGrace = 10 * time.Second

// graceful returns a context that outlives ctx's cancellation by grace,
// and a function that ends it.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return out, func() {
		stopWatch()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// run is one run of a job.
type run struct {
	cfg *Config
	// tidy is the context of what a cancelled run still does in order:
	// the run's, without its cancellation, for cleanupGrace.
	tidy        context.Context
	began       time.Time
	layout      layout
	fingerprint string
	files       []string // the inputs, expanded once
	parts       *parts
	schema      *arrow.Schema // the input's, as read
	aside       *aside        // SetAside mode, else nil
	stream      *outputStream // a fresh run's file output, written as it goes
}

// prepare checks the output, takes its lock and opens the parts: fresh,
// or the interrupted run's. It returns errFinished for an output an
// earlier run completed.
func (r *run) prepare(ctx context.Context) (locker, error) {
	cfg := r.cfg
	r.layout = layout{store: cfg.store, ctx: r.tidy, live: ctx, groupBytes: rowGroupBytes(cfg.MaxMemory)}
	if IsFolder(cfg.Output) {
		r.layout.dir, r.layout.folder = cfg.Output, true
		if !storage.IsURL(cfg.Output) {
			r.layout.dir = filepath.Clean(cfg.Output)
		}
	} else if _, err := sink.Writable(cfg.Output); err != nil {
		if storage.IsURL(cfg.Output) {
			err = fmt.Errorf("%w (a folder output's URL ends in /)", err)
		}
		return nil, err
	} else {
		dir, name := storage.Split(cfg.Output)
		r.layout.dir = storage.Join(dir, name+".parts")
	}
	files, err := fileset.ExpandContext(ctx, cfg.Inputs, fileset.WithOpener(cfg.store))
	if err != nil {
		return nil, err
	}
	r.files = files
	if err := checkNotInput(cfg.Output, r.layout, files); err != nil {
		return nil, err
	}
	if cfg.SetAside != "" {
		if err := checkNotInput(cfg.SetAside, layout{}, files); err != nil {
			return nil, err
		}
	}
	if dir := filepath.Dir(filepath.Clean(cfg.Output)); !storage.IsURL(cfg.Output) && missing(dir) {
		return nil, fmt.Errorf("job: the output's folder %s does not exist", dir)
	}
	held, err := lockOutput(ctx, r.tidy, cfg.store, cfg.Output, cfg.BreakLock)
	if err != nil {
		return nil, err
	}
	r.layout.fence = held.check
	if r.fingerprint, err = cfg.fingerprint(ctx, files); err == nil {
		err = cfg.checkOutput(r.layout, r.fingerprint)
	}
	if err == nil {
		r.parts, err = openParts(r.layout, r.fingerprint, cfg.PartRows, cfg.Resume, cfg.Overwrite)
	}
	if err == nil && !r.layout.folder {
		removeStrayTemps(cfg.Output)
	}
	if err == nil {
		r.abortUploads()
	}
	return held, err
}

// abortUploads aborts the uploads an earlier, killed run left incomplete
// (S3 keeps, and bills, them until they are aborted): the job holds the
// lock, so no upload to its output is another's. Those are the output
// file's and the parts folder's — which S3 lists by prefix, and MinIO
// and VersityGW only by the object's name: the part (and set-aside part)
// the manifest says comes next, which the killed run was writing, are
// named. Housekeeping: a store that refuses it (a policy without
// s3:ListBucketMultipartUploads) is a warning, not a failed job.
func (r *run) abortUploads() {
	if !storage.IsURL(r.cfg.Output) {
		return
	}
	next := len(r.parts.m.Parts)
	names := []string{r.cfg.Output, r.layout.path(r.layout.partName(next)), r.layout.path(asideName(next))}
	if !r.layout.folder {
		names = append(names, storage.Join(r.layout.dir, ""))
	}
	n, err := r.cfg.store.AbortUploads(r.layout.ctx, names...)
	if err != nil {
		r.cfg.Logger.Warn("could not abort the uploads an earlier run left incomplete", "error", err)
	}
	if n > 0 {
		r.cfg.Logger.Info("aborted incomplete uploads an earlier run left", "uploads", n)
	}
}

// predict reads the inputs from where the committed parts end, predicts,
// and writes parts (and rows set aside) through the write layer.
func (r *run) predict(ctx context.Context) (*Summary, error) {
	cfg, parts := r.cfg, r.parts
	if resumed := parts.rows(); resumed > 0 {
		cfg.Logger.Info("resuming", "parts", len(parts.m.Parts), "rows_done", resumed)
	}
	tracer := cfg.tracer()
	for i, pt := range parts.m.Parts {
		resumedSpan(ctx, tracer, "part", partAttributes(i, pt, true))
	}
	parts.inject = cfg.fail
	if !r.layout.folder && len(parts.m.Parts) == 0 {
		// Nothing to resume: the output is written as the parts are, and
		// needs no merge (a resumed run merges, to the same bytes).
		r.stream = &outputStream{output: cfg.Output, fingerprint: r.fingerprint, overwrite: cfg.Overwrite, mem: cfg.Allocator, store: cfg.store, inject: cfg.fail, groupBytes: rowGroupBytes(cfg.MaxMemory),
			fence: r.layout.fenced, ctx: ctx}
	}
	w, err := cfg.write(ctx, r.files, parts.inEnd(), func(a *aside, _ *arrow.Schema) output {
		return &partWriter{parts: parts, mem: cfg.Allocator, inject: cfg.fail, aside: a, stream: r.stream, ctx: ctx, tracer: tracer}
	})
	if err != nil {
		return nil, err
	}
	r.schema, r.aside = w.schema, w.aside
	return w.sum, nil
}

// complete writes the rows set aside, then the output: the merge of the
// parts into the file, or the folder's _SUCCESS.
func (r *run) complete(sum *Summary) error {
	cfg := r.cfg
	if r.aside != nil {
		if err := r.parts.mergeAside(cfg.SetAside, r.aside.schema, cfg.Allocator); err != nil {
			return err
		}
	}
	empty := func() (*arrow.Schema, error) { return cfg.outputSchema(r.schema) }
	var err error
	switch {
	case r.layout.folder:
		err = r.parts.seal(empty, cfg.Allocator)
	case r.stream != nil:
		var written bool
		if written, err = r.stream.finish(); err == nil {
			if written {
				err = r.parts.store.RemoveAll(r.parts.ctx, r.parts.dir)
			} else {
				err = r.parts.merge(cfg.Output, empty, cfg.Overwrite, cfg.Allocator)
			}
		}
	default:
		err = r.parts.merge(cfg.Output, empty, cfg.Overwrite, cfg.Allocator)
	}
	if err != nil {
		return err
	}
	sum.Parts = len(r.parts.m.Parts)
	sum.Wall = time.Since(r.began)
	if s := sum.Wall.Seconds(); s > 0 {
		sum.RowsPerSecond = float64(sum.Rows-sum.ResumedRows) / s
	}
	return nil
}

func missing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}
