package predict

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
)

var (
	// ErrBatchSize reports a batch size that is not positive.
	ErrBatchSize = errors.New("predict: batch size must be positive")
	// ErrRowCount reports a model that returned a different number of rows
	// than the padded batch it was given.
	ErrRowCount = errors.New("predict: model returned the wrong number of rows")
	// ErrPanic reports a model or hook that panicked; the panic was recovered.
	ErrPanic = errors.New("predict: panic")
	// ErrColumn reports a passthrough column that is missing from the input
	// or whose name clashes with a model output.
	ErrColumn = errors.New("predict: bad column")
	// ErrReplicas reports a replica count that is not positive or does not
	// divide the batch size.
	ErrReplicas = errors.New("predict: bad replica count")
	// ErrBatchSizes reports a list of allowed batch sizes that is empty,
	// not ascending, or does not end at the batch size.
	ErrBatchSizes = errors.New("predict: bad allowed batch sizes")
	// ErrOutputSchema reports a model whose output schema changed between batches.
	ErrOutputSchema = errors.New("predict: model output schema changed")
)

// Predictor runs a device.Model over datasets in fixed-size, padded batches. It is
// safe for concurrent use; every run has its own session.
type Predictor struct {
	model device.Model
	cfg   config
}

// New returns a Predictor for model.
func New(model device.Model, opts ...Option) (*Predictor, error) {
	c := config{batchSize: 128, replicas: 1, sessions: 1, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if model == nil {
		return nil, errors.New("predict: nil model")
	}
	if bs, ok := model.(device.BatchSizer); ok {
		if accepted := bs.BatchSizes(); accepted != nil {
			for _, size := range c.perReplicaSizes() {
				if !slices.Contains(accepted, size) {
					return nil, fmt.Errorf("%w: the model takes batches of %v rows a session, not %d", ErrBatchSizes, accepted, size)
				}
			}
		}
	}
	if sb, ok := model.(device.ShortBatcher); ok && sb.ShortBatches() {
		c.short = true
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return &Predictor{model: model, cfg: c}, nil
}

// Result is one batch of predictions, or the error that ended a run.
type Result struct {
	// Record holds one prediction row per input row of the batch, in input
	// order. The receiver owns it and must Release it.
	Record arrow.RecordBatch
	// Batch is the index of the batch the predictions belong to.
	Batch int
	// Err, when set, is the last Result of the run: the reason it failed.
	Err error
}

// Predict runs the model over ds and streams the predictions on the
// returned channel, one Result per batch, in input order.
//
// The consumer must drain the channel or cancel ctx. Either way the session
// shuts down exactly once, and the channel closes only after Shutdown has
// returned: when a range over the channel ends, the device is down and no
// goroutine of the run is left. A failure (the model's, a hook's, the
// input's, or Shutdown's) arrives as a last Result with Err set. After ctx
// is cancelled nothing more is sent; a failure other than the cancel itself
// is then logged.
func (p *Predictor) Predict(ctx context.Context, ds *dataset.Dataset) <-chan Result {
	out := make(chan Result)
	go func() {
		defer close(out)
		err := p.run(ctx, ds, func(rec arrow.RecordBatch, batch int) bool {
			select {
			case out <- Result{Record: rec, Batch: batch}:
				return true
			case <-ctx.Done():
				rec.Release()
				return false
			}
		})
		p.sendLast(ctx, out, err)
	}()
	return out
}

// sendLast delivers a run's failure as its last Result, or logs it when
// the consumer has cancelled.
func (p *Predictor) sendLast(ctx context.Context, out chan<- Result, err error) {
	if ctx.Err() != nil {
		p.logAfterStop(ctx, err)
		return
	}
	if err != nil {
		select {
		case out <- Result{Batch: -1, Err: err}:
		case <-ctx.Done():
			p.logAfterStop(ctx, err)
		}
	}
}

// All runs the model over ds and yields the predictions batch by batch, in
// input order; a failure is yielded last. Each record is borrowed for one
// iteration. Leaving the loop early (break, return, panic) shuts the session
// down before the range statement returns.
func (p *Predictor) All(ctx context.Context, ds *dataset.Dataset) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		stopped := false
		err := p.run(ctx, ds, func(rec arrow.RecordBatch, _ int) bool {
			defer rec.Release()
			stopped = !yield(rec, nil)
			return !stopped
		})
		switch {
		case err == nil:
		case stopped:
			p.logAfterStop(ctx, err)
		default:
			yield(nil, err)
		}
	}
}

// logAfterStop logs a failure that can no longer be delivered because the
// consumer has gone.
func (p *Predictor) logAfterStop(ctx context.Context, err error) {
	if err != nil && !errors.Is(err, context.Cause(ctx)) {
		p.cfg.logger.LogAttrs(ctx, slog.LevelError, "predict: failure after the consumer stopped", slog.Any("error", err))
	}
}

// run drives the sessions over ds, handing each batch's predictions to
// emit, which owns them and reports false when the consumer has gone.
func (p *Predictor) run(ctx context.Context, ds *dataset.Dataset, emit func(arrow.RecordBatch, int) bool) (err error) {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	c := &p.cfg
	padder, err := pad.New(c.mem, ds.Schema(), c.batchSize)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	defer padder.Release()
	st := Stats{}
	began := time.Now()
	groups, err := p.startGroups(ctx, padder.Schema(), padder)
	if err != nil {
		return err
	}
	log := c.logger
	// The times in the statistics are measured only for someone to read.
	clk := clock{stopped: c.onStats == nil && !log.Enabled(ctx, slog.LevelInfo)}
	if !clk.stopped {
		clk = newClock()
	}
	for _, g := range groups {
		g.step.clock = clk
	}
	log.LogAttrs(ctx, slog.LevelInfo, "sessions started", slog.Int("batch_size", c.batchSize), slog.Int("replicas", c.replicas), slog.Int("sessions", c.sessions))
	defer func() {
		var errs []error
		for _, g := range groups {
			errs = append(errs, g.Shutdown(ctx))
		}
		serr := errors.Join(errs...)
		err = errors.Join(err, serr)
		for _, g := range groups {
			st.Rows, st.Batches, st.PaddedRows = st.Rows+g.stats.Rows, st.Batches+g.stats.Batches, st.PaddedRows+g.stats.PaddedRows
			st.DeviceTime += g.stats.DeviceTime
		}
		st.Wall = time.Since(began)
		log.LogAttrs(ctx, slog.LevelInfo, "sessions shut down", slog.Any("error", serr), st.attr())
		if c.onStats != nil {
			c.onStats(st)
		}
	}()

	input := p.inputs(ds, padder)
	if c.prefetch > 0 {
		input = prefetch(ctx, input, c.prefetch, release)
	}
	if len(groups) > 1 {
		return p.runSessions(ctx, input, groups, clk, &st, emit)
	}
	g := groups[0]
	waitFrom := clk.now()
	for batch, err := range input {
		st.InputWait += clk.now() - waitFrom
		if err != nil {
			return err
		}
		rec, err := g.Run(ctx, batch)
		if err != nil {
			return p.atRunRow(err, batch.Index)
		}
		t := clk.now()
		ok := emit(rec, batch.Index)
		waitFrom = clk.now()
		st.ConsumerWait += waitFrom - t
		if !ok {
			return context.Cause(ctx)
		}
		if err := context.Cause(ctx); err != nil {
			return err
		}
	}
	return nil
}

// atRunRow moves a device's row error of batch index to the run's rows:
// every batch before the last is full, so batch i starts at row i·n.
func (p *Predictor) atRunRow(err error, index int) error {
	return shiftRow(err, int64(index)*int64(p.cfg.batchSize))
}

func inputError(index int, err error) error {
	if src := (*dataset.SourceError)(nil); errors.As(err, &src) {
		return err // it names its file and row: a batch index adds nothing
	}
	return fmt.Errorf("predict: batch %d: input: %w", index, err)
}

// step turns one padded batch into its predictions.
type step struct {
	p       *Predictor
	padder  *pad.Padder // for bisection (WithSetAside); nil when run online
	devices *replicas
	keep    []int         // passthrough column indices
	outputs *arrow.Schema // the model's output schema, from the first batch
	schema  *arrow.Schema // the schema of the delivered predictions
	stats   *Stats
	clock   clock // times the device
}

// run takes ownership of b.
func (s *step) run(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	defer release(b)
	index := b.Index
	for _, h := range s.p.cfg.hooks {
		if h.Before != nil {
			if err := protect("hook", func() error { return h.Before(ctx, b) }); err != nil {
				return nil, fmt.Errorf("predict: batch %d: before hook: %w", index, err)
			}
		}
	}

	t := s.clock.now()
	out, err := s.devices.predict(ctx, b)
	run := b // the rows predicted: all of b, or those bisection kept
	if err != nil && s.p.cfg.setAside != nil && s.padder != nil && ctx.Err() == nil {
		// Find the rows that fail on their own; predict the others.
		var kept arrow.RecordBatch
		if out, kept, err = s.bisect(ctx, b, err); kept != nil {
			defer kept.Release()
			run = device.Batch{Index: index, Record: kept}
		}
	}
	s.stats.DeviceTime += s.clock.now() - t
	if err != nil {
		return nil, fmt.Errorf("predict: batch %d: model: %w", index, err)
	}
	defer out.Release()
	rec, err := s.assemble(out, run)
	if err != nil {
		return nil, fmt.Errorf("predict: batch %d: %w", index, err)
	}
	for _, h := range s.p.cfg.hooks {
		if h.After != nil {
			if err := protect("hook", func() error { return h.After(ctx, run, rec) }); err != nil {
				rec.Release()
				return nil, fmt.Errorf("predict: batch %d: after hook: %w", index, err)
			}
		}
	}
	s.stats.Batches++
	s.stats.Rows += int64(run.Rows())
	s.stats.PaddedRows += int64(b.Padding) // as batched: a bisected batch's too
	return rec, nil
}

// assemble puts the passthrough columns of b and the model outputs side
// by side, then drops the padding rows (or appends the padding column).
func (s *step) assemble(out arrow.RecordBatch, b device.Batch) (arrow.RecordBatch, error) {
	padded := b.Record
	if len(s.keep) == 0 && !s.p.cfg.keepPadding && s.outputs != nil && out.Schema().Equal(s.outputs) {
		// Nothing to add: the model's output is the prediction.
		if b.Padding == 0 {
			out.Retain()
			return out, nil
		}
		return out.NewSlice(0, int64(b.Rows())), nil
	}
	if s.schema == nil {
		schema, err := s.outputSchema(out.Schema(), padded.Schema())
		if err != nil {
			return nil, err
		}
		s.outputs, s.schema = out.Schema(), schema
	} else if !out.Schema().Equal(s.outputs) {
		return nil, fmt.Errorf("%w: first %s, now %s", ErrOutputSchema, s.outputs, out.Schema())
	}
	cols := make([]arrow.Array, 0, s.schema.NumFields())
	for _, i := range s.keep {
		cols = append(cols, padded.Column(i))
	}
	cols = append(cols, out.Columns()...)
	if s.p.cfg.keepPadding {
		cols = append(cols, padded.Column(int(padded.NumCols())-1))
	}
	full := array.NewRecordBatch(s.schema, cols, padded.NumRows())
	if s.p.cfg.keepPadding || b.Padding == 0 {
		return full, nil
	}
	defer full.Release()
	return full.NewSlice(0, int64(b.Rows())), nil
}

// outputSchema returns the schema of delivered predictions: passthrough
// fields, model output fields, and the padding field if kept.
func (s *step) outputSchema(model, padded *arrow.Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(s.keep)+model.NumFields()+1)
	for _, i := range s.keep {
		fields = append(fields, padded.Field(i))
	}
	fields = append(fields, model.Fields()...)
	if s.p.cfg.keepPadding {
		fields = append(fields, pad.Field())
	}
	for i, f := range fields {
		if slices.ContainsFunc(fields[:i], func(g arrow.Field) bool { return g.Name == f.Name }) {
			return nil, fmt.Errorf("%w: output column %q appears twice (passthrough or model output)", ErrColumn, f.Name)
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// columnIndices returns the indices of the named columns of s.
func columnIndices(s *arrow.Schema, names []string) ([]int, error) {
	idx := make([]int, len(names))
	for i, name := range names {
		found := s.FieldIndices(name)
		if len(found) != 1 {
			return nil, fmt.Errorf("%w: passthrough column %q: %d columns of that name in the input", ErrColumn, name, len(found))
		}
		idx[i] = found[0]
	}
	return idx, nil
}

// PanicError is a recovered panic of a model or hook. It wraps ErrPanic.
type PanicError struct {
	Where string // "model predict", "hook", ...
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%v in %s: %v", ErrPanic, e.Where, e.Value)
}

func (e *PanicError) Unwrap() error { return ErrPanic }

// protect calls f, turning a panic into a *PanicError.
func protect(where string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Where: where, Value: r, Stack: debug.Stack()}
		}
	}()
	return f()
}
