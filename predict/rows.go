package predict

import (
	"errors"

	"github.com/drainpipe/drainpipe/device"
)

// shiftRow returns err with the row of its device.RowError, if it has one, moved
// on by offset rows.
func shiftRow(err error, offset int64) error {
	var re *device.RowError
	if offset == 0 || !errors.As(err, &re) {
		return err
	}
	if direct, ok := err.(*device.RowError); ok {
		return &device.RowError{Row: direct.Row + offset, Column: direct.Column, Err: direct.Err}
	}
	return &device.RowError{Row: re.Row + offset, Column: re.Column, Err: err}
}
