package device

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// PaddingColumn names the non-nullable bool column every batch carries:
// true for the padding rows at its end.
const PaddingColumn = "is_padding"

// Model is what a device implements, in the manner of database/sql/driver:
// a small interface that a runner (the predict package) drives. Start
// opens a session (one per replica, possibly concurrently); the runner
// calls Session.Predict once per batch, one call at a time per session, and
// Session.Shutdown exactly once.
type Model interface {
	Start(ctx context.Context, cfg SessionConfig) (Session, error)
}

// SessionConfig tells a session the static shape it will see.
type SessionConfig struct {
	// BatchSize is the number of rows of every batch this session receives
	// (the per-replica batch size, TPUEstimator's params['batch_size']).
	BatchSize int
	// BatchSizes are the per-replica batch sizes the session may receive,
	// ascending; the last is BatchSize. Batches smaller than BatchSize come
	// only when the runner was given allowed batch sizes, or to a
	// ShortBatcher.
	BatchSizes []int
	// Replica is this session's index among Replicas sessions.
	Replica, Replicas int
	// Sessions is how many groups of Replicas sessions run side by side,
	// each on whole batches: a device whose work fans out over the cores
	// should keep each session to one when Sessions or Replicas exceeds 1.
	Sessions int
	// Schema is the schema of every batch: the input's columns and the
	// non-nullable bool column PaddingColumn.
	Schema *arrow.Schema
	// Allocator is where output records should be allocated.
	Allocator memory.Allocator
}

// Session is one running device session.
type Session interface {
	// Predict returns the predictions for a padded batch: a new record with
	// exactly b.Record.NumRows() rows, owned by the caller. The batch is
	// borrowed for the call. Rows marked by PaddingColumn hold zero values;
	// their predictions are dropped.
	Predict(ctx context.Context, b Batch) (arrow.RecordBatch, error)
	// Shutdown releases the device. It is called exactly once, also after a
	// cancel or an error, with a context that is not cancelled.
	Shutdown(ctx context.Context) error
}

// Batch is one padded batch as the device sees it.
type Batch struct {
	// Index counts batches from 0 in input order.
	Index int
	// Record holds the batch rows followed by Padding padding rows, and
	// the PaddingColumn column. It is borrowed for the call.
	Record arrow.RecordBatch
	// Padding is the number of padding rows at the end of Record.
	Padding int
}

// Rows returns the number of real (not padding) rows of the batch.
func (b Batch) Rows() int { return int(b.Record.NumRows()) - b.Padding }

// RowError is an error about one row: a device's (Row counting from 0
// within the batch it was given) for a row it cannot predict, such as a
// null or non-finite feature; a tensor column's, a dataset's or a metric's.
// It is the project's one row error type: tensor, dataset and eval name it
// as their RowError. A runner passes it on with Row counting the rows of
// its run (wrapping the first), so a caller can name the input file and
// row (errors.As finds the outermost first).
type RowError struct {
	Row    int64
	Column string // the column at fault, if one is
	Err    error
}

// ValueError says which value of a row's tensor is at fault (Index, from
// 0), so a caller that gathered the tensor from columns can name the
// column it came from. Its message is Err's.
type ValueError struct {
	Index int
	Err   error
}

func (e *ValueError) Error() string { return e.Err.Error() }
func (e *ValueError) Unwrap() error { return e.Err }

// Error says the row, the column and the cause; a row moved on by a runner
// says its new number, not the one it wraps.
func (e *RowError) Error() string {
	column := e.Column
	for _, r := range e.chain() {
		column = cmp.Or(column, r.Column)
	}
	if column == "" {
		return fmt.Sprintf("row %d: %v", e.Row, e.Cause())
	}
	return fmt.Sprintf("row %d, column %q: %v", e.Row, column, e.Cause())
}

// Cause is what is wrong with the row: the error of the innermost RowError
// in the chain (a runner's context between them, such as a batch index,
// is left out: the row is named).
func (e *RowError) Cause() error {
	chain := e.chain()
	return chain[len(chain)-1].Err
}

// chain returns e and the RowErrors wrapped below it, outermost first,
// following the first error of a join.
func (e *RowError) chain() []*RowError {
	chain := []*RowError{e}
	for err := e.Err; err != nil; {
		if r, ok := err.(*RowError); ok {
			chain = append(chain, r)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			err = nil
			for _, inner := range u.Unwrap() {
				if errors.As(inner, new(*RowError)) {
					err = inner
					break
				}
			}
		default:
			err = nil
		}
	}
	return chain
}

func (e *RowError) Unwrap() error { return e.Err }

// Optional capabilities. A model may implement these; users of the
// contract check for them with a type assertion, as database/sql checks
// for driver.Pinger.

// OutputSchemaer is a model that states the schema of its predictions
// before it has run: a runner can then write an empty output for an empty
// input.
type OutputSchemaer interface {
	OutputSchema() *arrow.Schema
}

// BatchSizer is a model that accepts only some per-session batch sizes
// (such as an exported graph with a fixed batch dimension). BatchSizes
// returns them, ascending, or nil for any size. A runner refuses a
// configuration the model cannot take before starting a session.
type BatchSizer interface {
	BatchSizes() []int
}

// ShortBatcher is a model whose sessions take a batch of any number of
// rows up to the batch size, because its device shapes are its own (a
// sequence model plans each batch into sub-batches of declared shapes).
// A runner then pads a short batch only to a multiple of the replicas,
// not to a batch size: padding rows cost memory and are never run.
type ShortBatcher interface {
	ShortBatches() bool
}
