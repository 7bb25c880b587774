// Package atomicfile writes files that appear under their name only when
// complete and durable: written aside, synced, renamed into place, the
// folder synced. A crash leaves the old file or the new one, never half of
// one. The sink's outputs, the job's manifests and saved models use it.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrExists reports a destination that exists, on a Commit that may not
// replace it.
var ErrExists = errors.New("atomicfile: destination exists")

// File is a file being written beside its destination. Write to it (it is
// an *os.File), then Commit or Abort.
type File struct {
	*os.File
	path string
	done bool
	// written is the bytes Write wrote; begun, those whose writeback to
	// the disk has begun.
	written, begun int64
	writeback      func(f *os.File, off, n int64) // startWriteback; tests replace it
}

// writebackBytes is the bytes written after which their writeback to the
// disk begins, while writing goes on. Left to the commit's sync, a job's
// 50 MB output took 90 ms to sync at its end, the job waiting; begun as
// it went, 5 to 11 ms.
const writebackBytes = 4 << 20

// Write writes p at the file's offset and begins the writeback of every
// writebackBytes written: the bytes go to the disk while the caller goes
// on, and Commit's sync waits for little. Files are written in order, so
// what was written is the range from 0.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written += int64(n)
	if f.written-f.begun >= writebackBytes {
		f.writeback(f.File, f.begun, f.written-f.begun)
		f.begun = f.written
	}
	return n, err
}

// Create starts a file for path, in path's folder under a hidden
// temporary name (".NAME.tmp-…").
func Create(path string) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{File: tmp, path: path, writeback: startWriteback}, nil
}

// Path returns the destination.
func (f *File) Path() string { return f.path }

// Commit syncs and closes the file and renames it to its destination,
// which it replaces only if replace is set, then syncs the folder. The
// file is readable by all (0644). On failure the temporary file is gone.
func (f *File) Commit(replace bool) error {
	if f.done {
		return errors.New("atomicfile: committed or aborted already")
	}
	f.done = true
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !replace {
		if _, serr := os.Stat(f.path); serr == nil {
			err = fmt.Errorf("%w: %s", ErrExists, f.path)
		}
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return SyncDir(filepath.Dir(f.path))
}

// Abort discards the file. It is a no-op after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically and durably, replacing it.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit(true)
}

// SyncDir syncs a folder, so a rename in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
