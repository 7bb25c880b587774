//go:build !unix

package servebench

import (
	"errors"
	"time"
)

// CPUTime is not measured on this system.
func CPUTime() (time.Duration, error) {
	return 0, errors.New("servebench: a process's CPU time is read on Unix systems only")
}
