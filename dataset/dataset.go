package dataset

import (
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

var (
	// ErrSchemaMismatch reports a record whose schema differs from the dataset's.
	ErrSchemaMismatch = errors.New("dataset: record schema differs from the dataset schema")
	// ErrColumn reports a column that a dataset or file does not have.
	ErrColumn = errors.New("dataset: no such column")
	// ErrBatchSize reports a batch size that is not positive.
	ErrBatchSize = errors.New("dataset: batch size must be positive")
)

// Dataset is a finite, re-runnable stream of Arrow records of one schema.
// It is safe to range over a Dataset from several goroutines at once if its
// source is.
type Dataset struct {
	schema *arrow.Schema
	source iter.Seq2[arrow.RecordBatch, error]
}

// New returns a Dataset over source. Each range over source must start from
// the beginning, yield records of schema (borrowed for one iteration) and
// release whatever it acquired when the loop ends or breaks.
func New(schema *arrow.Schema, source iter.Seq2[arrow.RecordBatch, error]) *Dataset {
	return &Dataset{schema: schema, source: source}
}

// FromRecords returns a Dataset over in-memory records. The records are
// borrowed, not retained: they must stay valid while the Dataset is used.
func FromRecords(schema *arrow.Schema, recs ...arrow.RecordBatch) *Dataset {
	return New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	})
}

// FromReader returns a Dataset that calls open at the start of every range
// and reads records from the returned reader until it is exhausted. The
// reader is released when the range ends, however it ends.
func FromReader(schema *arrow.Schema, open func() (array.RecordReader, error)) *Dataset {
	return New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		rr, err := open()
		if err != nil {
			yield(nil, fmt.Errorf("dataset: open reader: %w", err))
			return
		}
		defer rr.Release()
		for rec, err := range array.IterFromReader(rr) {
			if err != nil {
				yield(nil, fmt.Errorf("dataset: read: %w", err))
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
	})
}

// Schema returns the schema of every record of the dataset.
func (d *Dataset) Schema() *arrow.Schema { return d.schema }

// Records iterates over the source records, borrowed for one iteration each.
// A record whose schema is not the dataset's ends the iteration with an
// error wrapping [ErrSchemaMismatch] that names the record's index.
func (d *Dataset) Records() iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		i := 0
		for rec, err := range d.source {
			if err != nil {
				yield(nil, atRecord(i, err))
				return
			}
			if !rec.Schema().Equal(d.schema) {
				yield(nil, atRecord(i, fmt.Errorf("%w: expected %s, got %s", ErrSchemaMismatch, d.schema, rec.Schema())))
				return
			}
			if !yield(rec, nil) {
				return
			}
			i++
		}
	}
}

// Count counts the rows of the dataset by reading it once.
func (d *Dataset) Count() (int64, error) {
	var n int64
	for rec, err := range d.Records() {
		if err != nil {
			return n, err
		}
		n += rec.NumRows()
	}
	return n, nil
}

// RecordError is an error of one source record: it names the record.
type RecordError struct {
	Record int // index of the record in the source, from 0
	Err    error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Record, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

// atRecord names record i in err, unless a dataset below already did.
func atRecord(i int, err error) error {
	var named *RecordError
	var src *SourceError
	if errors.As(err, &named) || errors.As(err, &src) {
		return err
	}
	return &RecordError{Record: i, Err: err}
}

// FieldNames lists the names of a schema's fields, for error messages.
func FieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// SourceError is an error of a dataset's source that names where it
// happened, such as a file (and the row in it). Runners pass it on without
// coordinates of their own (a record or batch index), which would only
// confuse a reader of the message.
type SourceError struct {
	Where string
	Err   error
}

func (e *SourceError) Error() string { return e.Where + ": " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }
