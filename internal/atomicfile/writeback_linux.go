package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback begins writing bytes [off, off+n) of f to the disk and
// returns without waiting for them (sync_file_range). It is a hint: an
// error (a file system without it) leaves the bytes to Commit's sync,
// which makes the file durable either way.
func startWriteback(f *os.File, off, n int64) {
	c, err := f.SyscallConn()
	if err != nil {
		return
	}
	c.Control(func(fd uintptr) {
		unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
