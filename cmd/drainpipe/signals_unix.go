//go:build unix

package main

import (
	"os/signal"
	"syscall"
)

// ignoreFileSizeSignal makes a write past the file size limit
// (RLIMIT_FSIZE) fail with EFBIG, reported like any write error, instead of
// killing the process with SIGXFSZ.
func ignoreFileSizeSignal() { signal.Ignore(syscall.SIGXFSZ) }
