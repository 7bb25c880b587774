package storage

import (
	"io"
	"sync"
)

// ReadAhead returns f with its ReadAt calls served from blocks of at
// least block bytes, fetched one at a time: for a reader that reads an
// object in order by small pieces (the messages of an Arrow IPC file),
// a request a block, not a request a piece. It holds one block.
func ReadAhead(f File, block int64) File {
	return &readAhead{File: f, block: block}
}

type readAhead struct {
	File
	block int64

	mu  sync.Mutex
	off int64 // of buf in the file
	buf []byte
}

func (r *readAhead) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off < r.off || off+int64(len(p)) > r.off+int64(len(r.buf)) {
		if off >= r.Size() {
			return 0, io.EOF
		}
		n := min(max(r.block, int64(len(p))), r.Size()-off)
		if int64(cap(r.buf)) < n {
			r.buf = make([]byte, n)
		}
		r.buf = r.buf[:n]
		got, err := r.File.ReadAt(r.buf, off)
		r.buf = r.buf[:got]
		r.off = off
		if err != nil && err != io.EOF {
			return 0, err
		}
	}
	n := copy(p, r.buf[off-r.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
