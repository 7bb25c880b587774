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

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/pad"
)

var (
	// ErrBatchSize reports a batch size that is not positive.
	ErrBatchSize = dataset.ErrBatchSize
	// ErrRowCount reports a model that returned a different number of rows
	// than the padded batch it was given.
	ErrRowCount = errors.New("predict: model returned the wrong number of rows")
	// ErrPanic reports a model or hook that panicked; the panic was recovered.
	ErrPanic = errors.New("predict: panic")
	// ErrColumn reports a passthrough column that is missing from the input
	// or whose name clashes with a model output.
	ErrColumn = errors.New("predict: bad column")
	// ErrOutputSchema reports a model whose output schema changed between batches.
	ErrOutputSchema = errors.New("predict: model output schema changed")
)

// Predictor runs a Model over datasets in fixed-size, padded batches. It is
// safe for concurrent use; every run has its own session.
type Predictor struct {
	model Model
	cfg   config
}

// New returns a Predictor for model.
func New(model Model, opts ...Option) (*Predictor, error) {
	c := config{batchSize: 128, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&c)
	}
	if c.batchSize <= 0 {
		return nil, fmt.Errorf("predict: %w: got %d", ErrBatchSize, c.batchSize)
	}
	if model == nil {
		return nil, errors.New("predict: nil model")
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return &Predictor{model: model, cfg: c}, nil
}

// BatchSize returns the global batch size.
func (p *Predictor) BatchSize() int { return p.cfg.batchSize }

// Result is one batch of predictions, or the error that ended a run.
type Result struct {
	// Record holds one prediction row per input row of the batch, in input
	// order. The receiver owns it and must Release it.
	Record arrow.Record
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
		err := p.run(ctx, ds, func(rec arrow.Record, batch int) bool {
			select {
			case out <- Result{Record: rec, Batch: batch}:
				return true
			case <-ctx.Done():
				rec.Release()
				return false
			}
		})
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
	}()
	return out
}

// All runs the model over ds and yields the predictions batch by batch, in
// input order; a failure is yielded last. Each record is borrowed for one
// iteration. Leaving the loop early (break, return, panic) shuts the session
// down before the range statement returns.
func (p *Predictor) All(ctx context.Context, ds *dataset.Dataset) iter.Seq2[arrow.Record, error] {
	return func(yield func(arrow.Record, error) bool) {
		stopped := false
		err := p.run(ctx, ds, func(rec arrow.Record, _ int) bool {
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

// run drives one session over ds, handing each batch's predictions to emit,
// which owns them and reports false when the consumer has gone.
func (p *Predictor) run(ctx context.Context, ds *dataset.Dataset, emit func(arrow.Record, int) bool) (err error) {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	n, mem := p.cfg.batchSize, p.cfg.mem
	padder, err := pad.New(mem, ds.Schema(), n)
	if err != nil {
		return fmt.Errorf("predict: %w", err)
	}
	defer padder.Release()
	keep, err := columnIndices(ds.Schema(), p.cfg.passthrough)
	if err != nil {
		return err
	}

	st := Stats{}
	began := time.Now()
	var sess Session
	err = protect("model start", func() (err error) {
		sess, err = p.model.Start(ctx, SessionConfig{BatchSize: n, Replicas: 1, Schema: padder.Schema(), Allocator: mem})
		return err
	})
	if err != nil {
		return fmt.Errorf("predict: start session: %w", err)
	}
	log := p.cfg.logger
	log.LogAttrs(ctx, slog.LevelInfo, "session started", slog.Int("batch_size", n))
	defer func() {
		serr := protect("model shutdown", func() error { return sess.Shutdown(context.WithoutCancel(ctx)) })
		if serr != nil {
			serr = fmt.Errorf("predict: shutdown session: %w", serr)
		}
		err = errors.Join(err, serr)
		st.Wall = time.Since(began)
		log.LogAttrs(ctx, slog.LevelInfo, "session shut down", slog.Any("error", serr), st.attr())
		if p.cfg.onStats != nil {
			p.cfg.onStats(st)
		}
	}()

	s := step{p: p, sess: sess, padder: padder, keep: keep, stats: &st}
	index := 0
	waitFrom := time.Now()
	for batch, err := range ds.Batches(mem, n) {
		st.InputWait += time.Since(waitFrom)
		if err != nil {
			return fmt.Errorf("predict: batch %d: input: %w", index, err)
		}
		if err := context.Cause(ctx); err != nil {
			return err
		}
		rec, err := s.run(ctx, batch, index)
		if err != nil {
			return err
		}
		t := time.Now()
		ok := emit(rec, index)
		st.ConsumerWait += time.Since(t)
		if !ok {
			return context.Cause(ctx)
		}
		index++
		waitFrom = time.Now()
	}
	return nil
}

// step turns one batch into its predictions.
type step struct {
	p       *Predictor
	sess    Session
	padder  *pad.Padder
	keep    []int         // passthrough column indices
	outputs *arrow.Schema // the model's output schema, from the first batch
	schema  *arrow.Schema // the schema of the delivered predictions
	stats   *Stats
}

func (s *step) run(ctx context.Context, batch arrow.Record, index int) (arrow.Record, error) {
	t := time.Now()
	padded, padding, err := s.padder.Pad(batch)
	s.stats.InputWait += time.Since(t)
	if err != nil {
		return nil, fmt.Errorf("predict: batch %d: %w", index, err)
	}
	defer padded.Release()
	info := BatchInfo{Index: index, Rows: int(batch.NumRows()), Padding: padding}
	for _, h := range s.p.cfg.hooks {
		if h.Before != nil {
			if err := protect("hook", func() error { return h.Before(ctx, info, padded) }); err != nil {
				return nil, fmt.Errorf("predict: batch %d: before hook: %w", index, err)
			}
		}
	}

	t = time.Now()
	var out arrow.Record
	err = protect("model predict", func() (err error) {
		out, err = s.sess.Predict(ctx, Batch{Index: index, Record: padded, Padding: padding})
		return err
	})
	s.stats.DeviceTime += time.Since(t)
	if err != nil {
		return nil, fmt.Errorf("predict: batch %d: model: %w", index, err)
	}
	defer out.Release()
	if out.NumRows() != padded.NumRows() {
		return nil, fmt.Errorf("predict: batch %d: %w: got %d, want %d", index, ErrRowCount, out.NumRows(), padded.NumRows())
	}
	rec, err := s.assemble(out, padded, info)
	if err != nil {
		return nil, fmt.Errorf("predict: batch %d: %w", index, err)
	}
	for _, h := range s.p.cfg.hooks {
		if h.After != nil {
			if err := protect("hook", func() error { return h.After(ctx, info, rec) }); err != nil {
				rec.Release()
				return nil, fmt.Errorf("predict: batch %d: after hook: %w", index, err)
			}
		}
	}
	s.stats.Batches++
	s.stats.Rows += int64(info.Rows)
	s.stats.PaddedRows += int64(info.Padding)
	return rec, nil
}

// assemble puts the passthrough columns and the model outputs side by side,
// then drops the padding rows (or appends the padding column).
func (s *step) assemble(out, padded arrow.Record, info BatchInfo) (arrow.Record, error) {
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
	full := array.NewRecord(s.schema, cols, padded.NumRows())
	if s.p.cfg.keepPadding || info.Padding == 0 {
		return full, nil
	}
	defer full.Release()
	return full.NewSlice(0, int64(info.Rows)), nil
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
