package dataset

import (
	"errors"
	"fmt"

	"github.com/drainpipe/drainpipe/tensor"
)

// RowError is an error of one row of a dataset: Row counts the rows the
// dataset yields, from 0. Column names the column at fault, if one is.
type RowError struct {
	Row    int64
	Column string
	Err    error
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("dataset row %d: %v", e.Row, e.Err)
	}
	return fmt.Sprintf("column %q, dataset row %d: %v", e.Column, e.Row, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// rowErrorIf is rowError for a non-nil err.
func rowErrorIf(column string, first int64, err error) error {
	if err == nil {
		return nil
	}
	return rowError(column, first, err)
}

// rowError names the dataset row of a tensor row error in a record whose
// first row is dataset row first.
func rowError(column string, first int64, err error) error {
	var te *tensor.RowError
	if errors.As(err, &te) {
		return &RowError{Row: first + int64(te.Row), Column: column, Err: err}
	}
	return fmt.Errorf("column %q, in the record from dataset row %d: %w", column, first, err)
}
