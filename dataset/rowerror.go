package dataset

import (
	"errors"
	"fmt"

	"github.com/drainpipe/drainpipe/device"
)

// RowError is an error of one row of a dataset: Row counts the rows the
// dataset yields, from 0; Column names the column at fault, if one is. It
// is the project's one row error type.
type RowError = device.RowError

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
	var re *RowError
	if errors.As(err, &re) {
		return &RowError{Row: first + re.Row, Column: column, Err: err}
	}
	return fmt.Errorf("column %q, in the record from dataset row %d: %w", column, first, err)
}
