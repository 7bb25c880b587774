//go:build unix

package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fileLock is a running job's exclusive hold on a local output: an flock
// on a hidden file beside the output. The kernel releases it when the
// process dies, however it dies, so a killed job leaves no lock held.
type fileLock struct {
	f    *os.File
	path string
}

// lockPath is the lock file of an output (a file or a folder).
func lockPath(output string) string {
	clean := filepath.Clean(output)
	return filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+".lock")
}

// lockFile takes a local output's lock, or reports the job holding it.
func lockFile(output string) (locker, error) {
	path := lockPath(output)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("job: lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			pid, _ := os.ReadFile(path)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (pid %s): %s", ErrLocked, strings.TrimSpace(string(pid)), output)
			}
			return nil, fmt.Errorf("job: lock %s: %w", path, err)
		}
		// The holder before us may have removed the file after we opened
		// it: then our lock is on a file nobody else will open. Start over.
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(held, named) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &fileLock{f: f, path: path}, nil
	}
}

// check reports nothing: the kernel keeps an flock for its holder.
func (l *fileLock) check() error { return nil }

// release removes the lock file, then lets the lock go.
func (l *fileLock) release(context.Context) error {
	os.Remove(l.path)
	return l.f.Close()
}
