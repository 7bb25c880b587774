package job

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
)

// Run runs the job to completion, or until ctx is cancelled or a step
// fails; the parts written so far then stay for a resume.
//
// The output is a file (.parquet, .arrow, .arrows), written once every
// part is done by merging them; or a folder ([IsFolder]) that holds the
// parts themselves as Parquet files (part-00000.parquet, …), the manifest
// (_manifest.json), and a _SUCCESS marker written last, as Spark, Hive and
// Beam write datasets: no merge, no second write.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: &cfg, began: time.Now()}
	held, err := r.prepare()
	if held != nil {
		defer held.release()
	}
	if errors.Is(err, errFinished) {
		// A run killed after its output was complete: resuming it only
		// tidies up.
		rows, ok := finished(r.layout, r.fingerprint)
		if !ok {
			rows = outputRows(cfg.Output) // the parts were gone: the output names its job
		}
		return &Summary{Output: cfg.Output, Rows: rows, RowsIn: rows, ResumedRows: rows, AlreadyComplete: true, Wall: time.Since(r.began)}, nil
	}
	if err != nil {
		return nil, err
	}
	sum, err := r.predict(ctx)
	if err == nil {
		err = r.complete(sum)
	}
	if err != nil {
		if len(r.parts.m.Parts) == 0 {
			r.parts.clear() // a run that failed before its first part leaves nothing to resume
		}
		return nil, err
	}
	return sum, nil
}

// run is one run of a job.
type run struct {
	cfg         *Config
	began       time.Time
	layout      layout
	fingerprint string
	files       []string // the inputs, expanded once
	parts       *parts
	schema      *arrow.Schema // the input's, as read
	aside       *aside        // SetAside mode, else nil
}

// prepare checks the output, takes its lock and opens the parts: fresh,
// or the interrupted run's. It returns errFinished for an output an
// earlier run completed.
func (r *run) prepare() (*lock, error) {
	cfg := r.cfg
	r.layout = layout{dir: cfg.Output + ".parts"}
	if IsFolder(cfg.Output) {
		r.layout = layout{dir: filepath.Clean(cfg.Output), folder: true}
	} else if _, err := sink.Writable(cfg.Output); err != nil {
		return nil, err
	}
	files, err := fileset.Expand(cfg.Inputs)
	if err != nil {
		return nil, err
	}
	r.files = files
	if err := checkNotInput(cfg.Output, r.layout, files); err != nil {
		return nil, err
	}
	held, err := lockOutput(cfg.Output)
	if err != nil {
		return nil, err
	}
	if r.fingerprint, err = cfg.fingerprint(files); err == nil {
		err = cfg.checkOutput(r.layout, r.fingerprint)
	}
	if err == nil {
		r.parts, err = openParts(r.layout, r.fingerprint, cfg.PartRows, cfg.Resume, cfg.Overwrite)
	}
	if err == nil && !r.layout.folder {
		removeStrayTemps(cfg.Output)
	}
	return held, err
}

// predict reads the inputs from where the committed parts end, predicts,
// writes parts (and rows set aside), and checks that no row was lost.
func (r *run) predict(ctx context.Context) (*Summary, error) {
	cfg, parts := r.cfg, r.parts
	// The input: every row read is counted and numbered (rowColumn); rows
	// a resume has done are skipped; in SetAside mode, rows that cannot be
	// predicted are set aside before batching.
	origins := &fileset.Origins{}
	skip := parts.inEnd()
	var in *countedInput
	if cfg.SetAside != "" {
		// Values are read (and this called) only once r.aside exists.
		cfg.badValue = func(path string, row int64, column string, err error) { r.aside.badValue(path, row, column, err) }
	}
	ds, total, err := cfg.dataset(r.files, origins, func(read *dataset.Dataset, gathered []string) *dataset.Dataset {
		in = cfg.counted(read, skip)
		if cfg.SetAside == "" {
			return in.ds
		}
		r.aside = newAside(read.Schema(), cfg.Keep, origins, cfg.Allocator)
		return cfg.screen(in.ds, r.aside, gathered)
	})
	if err != nil {
		return nil, err
	}
	r.schema = ds.Schema()
	if r.aside != nil {
		defer r.aside.release()
	}
	resumed := parts.rows()
	if resumed > 0 {
		cfg.Logger.Info("resuming", "parts", len(parts.m.Parts), "rows_done", resumed)
	}
	var stats predict.Stats
	opts := append(slices.Clone(cfg.Predict),
		predict.WithBatchSize(cfg.BatchSize),
		predict.WithAllocator(cfg.Allocator),
		predict.WithPassthrough(append(slices.Clone(cfg.Keep), rowColumn)...),
		predict.WithLogger(cfg.Logger),
		predict.WithStats(func(s predict.Stats) { stats = s }),
		predict.WithPrefetch(cfg.Prefetch),
		predict.WithHooks(predict.Hook{Before: func(_ context.Context, b device.Batch) error {
			return cfg.fail("predict", b.Index)
		}}),
	)
	if r.aside != nil {
		opts = append(opts, predict.WithSetAside(r.aside.predicted))
	}
	p, err := predict.New(cfg.Model, opts...)
	if err != nil {
		return nil, err
	}

	// The channel form runs the device in a goroutine of its own, so
	// writing a batch here overlaps with predicting the next.
	w := &partWriter{parts: parts, mem: cfg.Allocator, inject: cfg.fail, chunk: cfg.BatchSize, aside: r.aside}
	parts.inject = cfg.fail
	done := resumed
	running, stop := context.WithCancel(ctx)
	defer stop()
	var failed error
	// in is read after the channel closes, when its reader has stopped.
	for res := range p.Predict(running, ds) {
		if res.Err != nil {
			failed = res.Err
			continue
		}
		if failed == nil {
			if failed = w.write(res.Record); failed != nil {
				stop() // the channel closes once the device is down
			} else {
				done += res.Record.NumRows()
			}
		}
		res.Record.Release()
		if failed == nil && cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	}
	if failed == nil {
		failed = context.Cause(ctx)
	}
	if failed != nil {
		w.abort()
		return nil, origins.LocateError(failed, skip)
	}
	if err := w.finish(in.rows); err != nil {
		return nil, err
	}
	// Every row the inputs declare was read, and every row read written or
	// set aside.
	setAside := parts.asideRows()
	switch {
	case total >= 0 && in.rows != total:
		return nil, fmt.Errorf("%w: read %d rows of the %d the inputs declare", ErrRowsLost, in.rows, total)
	case done+setAside != in.rows:
		return nil, fmt.Errorf("%w: wrote %d rows and set %d aside of the %d read", ErrRowsLost, done, setAside, in.rows)
	}
	return &Summary{Output: cfg.Output, Rows: done, RowsIn: in.rows, RowsSetAside: setAside, ResumedRows: resumed, Stats: stats,
		Batches: stats.Batches, PaddedRows: stats.PaddedRows}, nil
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
	if r.layout.folder {
		err = r.parts.seal(empty, cfg.Allocator)
	} else {
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
