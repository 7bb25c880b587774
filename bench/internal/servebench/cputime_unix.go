//go:build unix

package servebench

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time this process has used, user and system.
func CPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
