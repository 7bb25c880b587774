package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// output is where the write layer puts the predictions: records of the
// Keep columns, the model's outputs and rowColumn (each row's input row),
// in input order.
type output interface {
	write(rec arrow.RecordBatch) error
	// finish makes everything written durable, once read rows were read.
	finish(read int64) error
	abort()
	// setAside returns the rows set aside and made durable.
	setAside() int64
}

// written is what the write layer did.
type written struct {
	sum    *Summary
	schema *arrow.Schema // the input's, as read
	aside  *aside        // SetAside mode, else nil
}

// write is the layer under Run and WriteFile: it reads the inputs (from
// input row skip on), predicts them and hands the predictions to the
// output open makes (given the aside of SetAside mode and the input's
// schema as read), then checks that every row the inputs declare was
// read and every row read was written or set aside. A failure aborts the
// output and names the file and row it is about, if one.
func (c *Config) write(ctx context.Context, files []string, skip int64, open func(a *aside, read *arrow.Schema) output) (*written, error) {
	// Every row read is counted and numbered (rowColumn); rows a resume
	// has done are skipped; in SetAside mode, rows that cannot be
	// predicted are set aside before batching.
	origins := &fileset.Origins{}
	var in *countedInput
	var a *aside
	if c.SetAside != "" {
		// Values are read (and this called) only once a exists.
		c.badValue = func(path string, row int64, column string, err error) { a.badValue(path, row, column, err) }
	}
	ds, total, err := c.dataset(files, origins, func(read *dataset.Dataset, gathered []string) *dataset.Dataset {
		in = c.counted(read, skip)
		if c.SetAside == "" {
			return in.ds
		}
		a = newAside(read.Schema(), c.Keep, origins, c.Allocator)
		return c.screen(in.ds, a, gathered)
	})
	if err != nil {
		return nil, err
	}
	if a != nil {
		defer a.release()
	}
	var stats predict.Stats
	opts := append(slices.Clone(c.Predict),
		predict.WithBatchSize(c.BatchSize),
		predict.WithAllocator(c.Allocator),
		predict.WithPassthrough(append(slices.Clone(c.Keep), rowColumn)...),
		predict.WithLogger(c.Logger),
		predict.WithStats(func(s predict.Stats) { stats = s }),
		predict.WithPrefetch(c.Prefetch),
		predict.WithHooks(predict.Hook{Before: func(_ context.Context, b device.Batch) error {
			return c.fail("predict", b.Index)
		}}),
	)
	if a != nil {
		opts = append(opts, predict.WithSetAside(a.predicted))
	}
	p, err := predict.New(c.Model, opts...)
	if err != nil {
		return nil, err
	}

	// The channel form runs the device in a goroutine of its own, so
	// writing a batch here overlaps with predicting the next.
	w := open(a, ds.Schema())
	resumed := skip - w.setAside() // rows written by the run resumed
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
		if failed == nil && c.Progress != nil {
			c.Progress(done, total)
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
	setAside := w.setAside()
	switch {
	case total >= 0 && in.rows != total:
		return nil, fmt.Errorf("%w: read %d rows of the %d the inputs declare", ErrRowsLost, in.rows, total)
	case done+setAside != in.rows:
		return nil, fmt.Errorf("%w: wrote %d rows and set %d aside of the %d read", ErrRowsLost, done, setAside, in.rows)
	}
	sum := &Summary{Output: c.Output, Rows: done, RowsIn: in.rows, RowsSetAside: setAside, ResumedRows: resumed, Stats: stats,
		Batches: stats.Batches, PaddedRows: stats.PaddedRows, Inputs: c.store.Traffic()}
	if len(sum.Inputs) == 0 {
		sum.Inputs = nil
	}
	return &written{sum: sum, schema: ds.Schema(), aside: a}, nil
}

// WriteFile predicts cfg's inputs into the one file cfg.Output (.parquet,
// .arrow, .arrows), written once: it appears whole, or not at all. There
// is no lock, no parts and no manifest, so no resume: it is for a runner
// that retries a failed piece of work whole and names its output
// deterministically, such as a Beam shard, which together give exactly
// once. The rows read, written and declared are checked as Run checks
// them. SetAside and Resume are Run's; WriteFile refuses them.
func WriteFile(ctx context.Context, cfg Config) (*Summary, error) {
	began := time.Now()
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	switch {
	case cfg.SetAside != "" || cfg.Resume:
		return nil, errors.New("job: WriteFile writes one file whole: SetAside and Resume are Run's")
	case IsFolder(cfg.Output):
		return nil, fmt.Errorf("job: WriteFile writes one file, not the folder %s", cfg.Output)
	}
	cfg.store = storage.NewOpener()
	defer cfg.store.Close()
	files, err := fileset.Expand(cfg.Inputs)
	if err != nil {
		return nil, err
	}
	if err := checkNotInput(cfg.Output, layout{}, files); err != nil {
		return nil, err
	}
	w, err := cfg.write(ctx, files, 0, func(_ *aside, read *arrow.Schema) output { return &fileOutput{cfg: &cfg, read: read} })
	if err != nil {
		return nil, err
	}
	w.sum.Parts = 1
	w.sum.Wall = time.Since(began)
	if s := w.sum.Wall.Seconds(); s > 0 {
		w.sum.RowsPerSecond = float64(w.sum.Rows) / s
	}
	return w.sum, nil
}

// fileOutput writes the predictions, without rowColumn, to one file.
type fileOutput struct {
	cfg    *Config
	read   *arrow.Schema // the input's
	schema *arrow.Schema // of the rows written
	w      *sink.Writer
}

func (o *fileOutput) create(schema *arrow.Schema) error {
	w, err := sink.Create(o.cfg.Output, schema, sink.WithAllocator(o.cfg.Allocator), sink.WithOverwrite(o.cfg.Overwrite), sink.WithOpener(o.cfg.store))
	if err != nil {
		return err
	}
	o.w, o.schema = w, schema
	return nil
}

func (o *fileOutput) write(rec arrow.RecordBatch) error {
	if o.w == nil {
		if err := o.create(predictionSchema(rec.Schema())); err != nil {
			return err
		}
	}
	out := predictions(rec, o.schema)
	defer out.Release()
	return o.w.Write(out)
}

func (o *fileOutput) finish(int64) error {
	if o.w == nil {
		// No row: an empty file of the schema the model states.
		schema, err := o.cfg.outputSchema(o.read)
		if err != nil {
			return err
		}
		if err := o.create(schema); err != nil {
			return err
		}
	}
	return o.w.Commit()
}

func (o *fileOutput) abort() {
	if o.w != nil {
		o.w.Abort()
	}
}

func (o *fileOutput) setAside() int64 { return 0 }

// predictionSchema is the schema of what the write layer hands an output,
// without rowColumn: what the output file holds.
func predictionSchema(s *arrow.Schema) *arrow.Schema {
	idx := s.FieldIndices(rowColumn)[0]
	return arrow.NewSchema(slices.Delete(slices.Clone(s.Fields()), idx, idx+1), nil)
}

// predictions returns rec without rowColumn, as a record of schema (its
// predictionSchema), sharing the columns; the caller releases it.
func predictions(rec arrow.RecordBatch, schema *arrow.Schema) arrow.RecordBatch {
	idx := rec.Schema().FieldIndices(rowColumn)[0]
	return array.NewRecordBatch(schema, slices.Delete(slices.Clone(rec.Columns()), idx, idx+1), rec.NumRows())
}
