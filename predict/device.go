package predict

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Model is what a device implements, in the manner of database/sql/driver:
// a small interface that the Predictor drives. Start opens a session (one
// per replica, possibly concurrently); the Predictor calls Session.Predict
// once per batch, one call at a time per session, and Session.Shutdown
// exactly once.
type Model interface {
	Start(ctx context.Context, cfg SessionConfig) (Session, error)
}

// SessionConfig tells a session the static shape it will see.
type SessionConfig struct {
	// BatchSize is the number of rows of every batch this session receives
	// (the per-replica batch size, TPUEstimator's params['batch_size']).
	BatchSize int
	// BatchSizes are the per-replica batch sizes the session may receive,
	// ascending; the last is BatchSize. Only the final batch of a run can
	// be smaller than BatchSize, and only when the Predictor was given
	// allowed batch sizes (WithBatchSizes).
	BatchSizes []int
	// Replica is this session's index among Replicas sessions.
	Replica, Replicas int
	// Schema is the schema of every batch: the dataset's columns and the
	// non-nullable bool column pad.Column.
	Schema *arrow.Schema
	// Allocator is where output records should be allocated.
	Allocator memory.Allocator
}

// Session is one running device session.
type Session interface {
	// Predict returns the predictions for a padded batch: a new record with
	// exactly b.Record.NumRows() rows, owned by the caller. The batch is
	// borrowed for the call. Rows marked by the pad.Column column hold zero
	// values; their predictions are dropped.
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
	// the pad.Column column. It is borrowed for the call.
	Record arrow.RecordBatch
	// Padding is the number of padding rows at the end of Record.
	Padding int
}

// Rows returns the number of real (not padding) rows of the batch.
func (b Batch) Rows() int { return int(b.Record.NumRows()) - b.Padding }

// RowError is a device's error about one row of a batch: a session returns
// it (Row counting from 0 within the batch it was given) for a row it
// cannot predict, such as a null or non-finite feature. The Predictor
// passes it on with Row counting the rows of the run, so a caller can
// name the input row.
type RowError struct {
	Row    int64
	Column string
	Err    error
}

func (e *RowError) Error() string {
	var inner *RowError
	if errors.As(e.Err, &inner) {
		return e.Err.Error() // a row moved on by the Predictor: the inner one says it
	}
	return fmt.Sprintf("row %d, column %q: %v", e.Row, e.Column, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// shiftRow returns err with the row of its RowError, if it has one, moved
// on by offset rows.
func shiftRow(err error, offset int64) error {
	var re *RowError
	if offset == 0 || !errors.As(err, &re) {
		return err
	}
	if direct, ok := err.(*RowError); ok {
		return &RowError{Row: direct.Row + offset, Column: direct.Column, Err: direct.Err}
	}
	return &RowError{Row: re.Row + offset, Column: re.Column, Err: err}
}
