package job

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
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
	// The job's stages: the input read (its columns); every row counted
	// and numbered (rowColumn), the rows a resume has done skipped; in
	// SetAside mode, rows that cannot be predicted set aside; the feature
	// tensor made; then Stage's, before batching.
	origins := &fileset.Origins{}
	var a *aside
	if c.SetAside != "" {
		// Values are read (and this called) only once a exists.
		c.badValue = func(path string, row int64, column string, err error) { a.badValue(path, row, column, err) }
	}
	read, gathered, total, err := c.dataset(ctx, files, origins)
	if err != nil {
		return nil, err
	}
	in := c.counted(read, skip)
	ds := in.ds
	if c.SetAside != "" {
		a = newAside(read.Schema(), c.kept(), origins, c.Allocator)
		defer a.release()
		a.sourceColumn = func(err error) string { return sourceColumn(err, gathered) }
		ds = c.screen(ds, a, gathered)
	}
	if ds, err = c.features().Tensor(ds, gathered, c.Allocator); err != nil {
		return nil, err
	}
	if c.Stage != nil {
		var setAside func(arrow.RecordBatch, int, error)
		if a != nil {
			setAside = func(rec arrow.RecordBatch, i int, err error) { a.refused(rec, i, err) }
		}
		if ds, err = c.Stage(ds, setAside); err != nil {
			return nil, err
		}
	}
	var stats predict.Stats
	records := func(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] { return c.read(ctx, ds) }
	if c.Model != nil {
		opts := append(slices.Clone(c.Predict),
			predict.WithBatchSize(c.BatchSize),
			predict.WithAllocator(c.Allocator),
			predict.WithPassthrough(append(slices.Clone(c.kept()), rowColumn)...),
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
		records = func(ctx context.Context) iter.Seq2[arrow.RecordBatch, error] {
			return func(yield func(arrow.RecordBatch, error) bool) {
				for res := range p.Predict(ctx, ds) {
					yield(res.Record, res.Err) // drained whatever yield says: the device shuts down when it closes
				}
			}
		}
	}

	w := open(a, ds.Schema())
	resumed := skip - w.setAside() // rows written by the run resumed
	done := resumed
	running, stop := context.WithCancel(ctx)
	defer stop()
	var failed error
	// in is read once the records end, when its reader has stopped.
	for rec, err := range ahead(running, records, aheadBytes(c.MaxMemory)) {
		if err != nil {
			failed = err
			continue
		}
		if failed == nil {
			if failed = w.write(rec); failed != nil {
				stop() // the records end once the device is down
			} else {
				done += rec.NumRows()
			}
		}
		rec.Release()
		if failed == nil && c.Progress != nil {
			c.Progress(done, total)
		}
	}
	if failed == nil {
		failed = context.Cause(ctx)
	}
	if failed != nil {
		w.abort()
		if col := sourceColumn(failed, gathered); col != "" {
			var re *dataset.RowError
			errors.As(failed, &re)
			failed = &dataset.RowError{Row: re.Row, Column: col, Err: failed}
		}
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
// them. With SetAside, the rows set aside are written to that file, whole,
// before the output. Resume is Run's; WriteFile refuses it.
func WriteFile(ctx context.Context, cfg Config) (*Summary, error) {
	if IsFolder(cfg.Output) {
		return nil, fmt.Errorf("job: WriteFile writes one file, not the folder %s", cfg.Output)
	}
	return cfg.whole(ctx, func(a *aside, read *arrow.Schema) output {
		return &fileOutput{cfg: &cfg, read: read, aside: a}
	})
}

// sourceColumn names the input column a row error's value came from,
// when the device names a value (device.ValueError) of a tensor gathered
// from columns: "f1", not the gathered "features". "" otherwise.
func sourceColumn(err error, gathered []string) string {
	var re *dataset.RowError
	var ve *device.ValueError
	if len(gathered) == 0 || !errors.As(err, &re) || !errors.As(err, &ve) || ve.Index < 0 || ve.Index >= len(gathered) {
		return ""
	}
	return gathered[ve.Index]
}

// Each runs cfg's job as WriteFile does, but hands the predictions to fn
// instead of writing a file: records of the Keep columns, the Label and
// the model's outputs, one row an input row not set aside, in input
// order, borrowed for the call. An error from fn ends the run with it;
// one about a row of the record (a *device.RowError, Row counting within
// it) is made to name the row's file and file row. cfg.Output must be
// empty; SetAside is written as WriteFile writes it.
func Each(ctx context.Context, cfg Config, fn func(arrow.RecordBatch) error) (*Summary, error) {
	if cfg.Output != "" {
		return nil, errors.New("job: Each hands the predictions to a function: Output must be empty")
	}
	return cfg.whole(ctx, func(a *aside, _ *arrow.Schema) output { return &funcOutput{fn: fn, aside: a, cfg: &cfg} })
}

// Read reads cfg's inputs as a job would before its model: fn gets
// records of the feature column (InputSize values a row; 0 takes the
// width of the first row), the Keep columns and the Label, in input
// order, borrowed for the call, with SetAside's screening (rows whose
// features or label are null or ragged, values that do not parse) done
// and written as in WriteFile. cfg.Model and Output must be unset, and
// BatchSize is unused; it is what a trainer reads.
func Read(ctx context.Context, cfg Config, fn func(arrow.RecordBatch) error) (*Summary, error) {
	if cfg.Model != nil || cfg.Output != "" {
		return nil, errors.New("job: Read reads the inputs for a function: Model and Output must be unset")
	}
	cfg.readOnly = true
	cfg.BatchSize = max(cfg.BatchSize, 1) // nothing is batched
	return cfg.whole(ctx, func(a *aside, _ *arrow.Schema) output { return &funcOutput{fn: fn, aside: a, cfg: &cfg} })
}

// whole runs the job with an output that is made whole at the end (no
// parts, no resume).
func (c *Config) whole(ctx context.Context, open func(a *aside, read *arrow.Schema) output) (*Summary, error) {
	began := time.Now()
	if err := c.defaults(); err != nil {
		return nil, err
	}
	if c.Resume {
		return nil, errors.New("job: Resume continues Run's parts; this job is written whole")
	}
	c.openStore()
	defer c.store.Close()
	c.ctx = ctx
	files, err := fileset.ExpandContext(ctx, c.Inputs, fileset.WithOpener(c.store))
	if err != nil {
		return nil, err
	}
	for _, out := range []string{c.Output, c.SetAside} {
		if out != "" {
			if err := checkNotInput(out, layout{}, files); err != nil {
				return nil, err
			}
		}
	}
	w, err := c.write(ctx, files, 0, open)
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

// read yields ds's records, owned by the caller, until ctx ends: the
// records of a job with no model.
func (c *Config) read(ctx context.Context, ds *dataset.Dataset) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range ds.Records() {
			if err == nil {
				err = context.Cause(ctx)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			rec.Retain()
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// funcOutput hands the records, without rowColumn, to a function.
type funcOutput struct {
	cfg    *Config
	fn     func(arrow.RecordBatch) error
	aside  *aside // SetAside mode, else nil
	schema *arrow.Schema
	asides int64
}

func (o *funcOutput) write(rec arrow.RecordBatch) error {
	if o.schema == nil {
		o.schema = predictionSchema(rec.Schema())
	}
	out := predictions(rec, o.schema)
	defer out.Release()
	err := o.fn(out)
	// A row of out is a row of rec: moved on to its dataset row, the
	// error names its file and file row.
	if re := (*dataset.RowError)(nil); errors.As(err, &re) && re.Row >= 0 && re.Row < rec.NumRows() {
		rows := rec.Column(rec.Schema().FieldIndices(rowColumn)[0]).(*array.Int64)
		return &dataset.RowError{Row: rows.Value(int(re.Row)), Err: err}
	}
	return err
}

func (o *funcOutput) finish(int64) (err error) {
	o.asides, err = o.aside.writeFile(o.cfg)
	return err
}

func (o *funcOutput) abort()          {}
func (o *funcOutput) setAside() int64 { return o.asides }

// fileOutput writes the predictions, without rowColumn, to one file.
type fileOutput struct {
	cfg    *Config
	read   *arrow.Schema // the input's
	schema *arrow.Schema // of the rows written
	w      *sink.Writer
	aside  *aside // SetAside mode, else nil
	asides int64  // rows set aside and written
}

func (o *fileOutput) create(schema *arrow.Schema) error {
	w, err := sink.Create(o.cfg.Output, schema, sink.WithAllocator(o.cfg.Allocator), sink.WithOverwrite(o.cfg.Overwrite), sink.WithOpener(o.cfg.store),
		sink.WithContext(o.cfg.ctx), sink.WithRowGroupBytes(rowGroupBytes(o.cfg.MaxMemory)))
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

func (o *fileOutput) finish(read int64) (err error) {
	if o.asides, err = o.aside.writeFile(o.cfg); err != nil {
		o.abort()
		return err
	}
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
	if o.cfg.unit != nil {
		ft, err := o.cfg.footer(read, o.asides)
		if err == nil {
			err = o.w.SetFooter(unitKey, ft)
		}
		if err != nil {
			o.abort()
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

func (o *fileOutput) setAside() int64 { return o.asides }

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
