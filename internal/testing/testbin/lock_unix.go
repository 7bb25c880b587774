//go:build unix

package testbin

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lock takes an exclusive flock on the file at path, waiting while
// another process (or another call in this one) holds it, until ctx
// ends. The kernel lets it go when its holder dies, however it dies. The
// file stays: removing it would race with a process that has opened it
// and waits.
func lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// flock cannot be interrupted, so the wait polls: a build takes
	// minutes, and a tenth of a second after it is nothing.
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
