package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// File is an open file or object: read it in sequence, or at offsets
// (an object by range requests).
type File interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	Size() int64
}

// ContextReaderAt is a File whose reads at offsets can be made under a
// context of their own (an object's).
type ContextReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// Open opens name for reading.
func (o *Opener) Open(ctx context.Context, name string) (File, error) {
	if !IsURL(name) {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return localFile{f, st.Size()}, nil
	}
	if isHTTP(name) {
		return o.openHTTP(ctx, name)
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return nil, err
	}
	st, err := o.statPinned(ctx, b, name, ob.key)
	if err != nil {
		return nil, err
	}
	return &objectFile{ctx: ctx, name: name, size: st.size, fetch: blobFetch(b, ob.key, st), state: st}, nil
}

// ErrChanged reports an object that changed while it was being read.
var ErrChanged = errors.New("the object changed while it was read")

// pinned returns the read options that make every request of a read ask
// for the object as it was pinned: If-Match its ETag on S3 and Azure, its
// generation on GCS (the driver's PinRead). A file replaced under a
// running read is then an error (412, FailedPrecondition, or a generation
// gone), never a mix of two versions.
func (st *objectState) pinned() *blob.ReaderOptions {
	v := Version{ETag: st.etag, Generation: st.generation}
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		quiet(as)
		if v == (Version{}) {
			return nil
		}
		for _, d := range registered() {
			if d.PinRead(as, v) {
				break
			}
		}
		return nil
	}}
}

type localFile struct {
	*os.File
	size int64
}

func (f localFile) Size() int64 { return f.size }

// objectFile reads an object by range requests: ReadAt asks for the bytes
// it is given room for; Read streams from the offset on.
type objectFile struct {
	ctx       context.Context
	name      string
	size, off int64
	// fetch asks for length bytes from off (-1: to the end) of the
	// version the file was opened at, in one request.
	fetch  func(ctx context.Context, off, length int64) (io.ReadCloser, error)
	stream io.ReadCloser // open from off, for Read
	state  *objectState  // counts the requests and bytes

	// The object's last bytes when the Opener keeps no more tails.
	tail   atomic.Pointer[[]byte]
	tailMu sync.Mutex
}

// tailAhead is what a read ending at an object's end fetches: the tail
// of the object up to this size, so that a footer read as file formats
// read it (its length at the end, then the footer before it) costs one
// request, not two.
const tailAhead = 16 << 10

// blobFetch fetches ranges of a bucket's object, pinned to a version:
// each request asks for it, and each response is checked to be it, for a
// store may ignore the condition (gofakes3 serves whatever it holds).
func blobFetch(b *blob.Bucket, key string, st *objectState) func(context.Context, int64, int64) (io.ReadCloser, error) {
	opts := st.pinned()
	return func(ctx context.Context, off, length int64) (io.ReadCloser, error) {
		r, err := b.NewRangeReader(ctx, key, off, length, opts)
		if err != nil {
			return nil, err
		}
		if err := st.check(r); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}

// check reports ErrChanged for a response that is not of the pinned
// version: another ETag (S3, Azure), generation (GCS) or object size.
func (st *objectState) check(r *blob.Reader) error {
	got := responseVersion(r)
	switch {
	case got.Generation != 0 && st.generation != 0 && got.Generation != st.generation:
		return fmt.Errorf("%w: the store answered generation %d for the pinned %d", ErrChanged, got.Generation, st.generation)
	case got.ETag != "" && st.etag != "" && got.ETag != st.etag:
		return fmt.Errorf("%w: the store answered ETag %s for the pinned %s", ErrChanged, got.ETag, st.etag)
	case r.Size() != st.size:
		return fmt.Errorf("%w: the store answered a size of %d bytes for the pinned %d", ErrChanged, r.Size(), st.size)
	}
	return nil
}

// retryable reports whether a request that failed with err may succeed
// if made again: a cut body, a refusal the server says is passing.
func retryable(err error) bool {
	var he *httpError
	if errors.As(err, &he) {
		return he.status >= 500 || he.status == http.StatusTooManyRequests
	}
	return !errors.Is(err, ErrChanged) && !errors.Is(err, ErrNotFound) && gcerrors.Code(err) == gcerrors.Unknown
}

func (f *objectFile) Size() int64 { return f.size }

// readAttempts bounds the requests one read makes when a response is cut
// mid-body: each asks for the rest of the range. (The SDK retries a
// request the server refuses, such as a 503, on its own.)
const readAttempts = 4

func (f *objectFile) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtContext(f.ctx, p, off)
}

// ReadAtContext is ReadAt with the requests made under ctx instead of the
// context the file was opened with: for reads ahead of a reader, which
// its Close must be able to end at once.
func (f *objectFile) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("storage: %s: negative offset %d", redact(f.name), off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	tail := f.cachedTail()
	if tail == nil && off+n == f.size && n < tailAhead {
		var err error
		if tail, err = f.fetchTail(ctx); err != nil {
			return 0, err
		}
	}
	fetch := n
	if tailOff := f.size - int64(len(tail)); tail != nil && off+n > tailOff {
		// The part in the tail is there already.
		from := max(off, tailOff)
		copy(p[from-off:n], tail[from-tailOff:])
		fetch = from - off
	}
	if got, err := f.readFull(ctx, p[:fetch], off); err != nil {
		return int(got), err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// cachedTail returns the object's tail if fetched: the Opener's, or this
// file's own.
func (f *objectFile) cachedTail() []byte {
	if t := f.state.tail.Load(); t != nil {
		return *t
	}
	if t := f.tail.Load(); t != nil {
		return *t
	}
	return nil
}

// fetchTail fetches the object's tail, once (a failed fetch is tried
// again by the next read), and keeps it in the Opener while its budget
// allows, else in this file.
func (f *objectFile) fetchTail(ctx context.Context) ([]byte, error) {
	st := f.state
	mu, keep := &st.tailMu, &st.tail
	if o := st.opener; o == nil || o.tails.Load() >= tailsKept {
		mu, keep = &f.tailMu, &f.tail
	}
	mu.Lock()
	defer mu.Unlock()
	if t := keep.Load(); t != nil {
		return *t, nil
	}
	tail := make([]byte, min(f.size, tailAhead))
	if _, err := f.readFull(ctx, tail, f.size-int64(len(tail))); err != nil {
		return nil, err
	}
	if keep == &st.tail {
		st.opener.tails.Add(int64(len(tail)))
	}
	keep.Store(&tail)
	return tail, nil
}

// readFull reads len(p) bytes from off, in as few requests as a cut
// response lets it.
func (f *objectFile) readFull(ctx context.Context, p []byte, off int64) (int64, error) {
	n, got := int64(len(p)), int64(0)
	for attempt := 1; got < n; attempt++ {
		k, err := f.readRange(ctx, p[got:n], off+got)
		got += int64(k)
		if err != nil && (attempt == readAttempts || ctx.Err() != nil || !retryable(err)) {
			return got, f.readError(fmt.Errorf("bytes %d-%d: %w", off, off+n-1, err))
		}
	}
	return got, nil
}

// readError names the object in a read's error; an object gone since it
// was opened (or, on GCS, whose pinned generation is gone) has changed.
func (f *objectFile) readError(err error) error {
	if errors.Is(err, ErrNotFound) || gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("storage: %s: %w (gone, or replaced)", redact(f.name), ErrChanged)
	}
	return objectError(f.name, err)
}

// readRange reads len(p) bytes from off in one request.
func (f *objectFile) readRange(ctx context.Context, p []byte, off int64) (int, error) {
	f.state.requests.Add(1)
	r, err := f.fetch(ctx, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	f.state.fetched.Add(int64(n))
	return n, err
}

func (f *objectFile) Read(p []byte) (int, error) {
	if f.off >= f.size {
		return 0, io.EOF
	}
	for attempt := 1; ; attempt++ {
		if f.stream == nil {
			f.state.requests.Add(1)
			r, err := f.fetch(f.ctx, f.off, -1)
			if err != nil {
				return 0, f.readError(err)
			}
			f.stream = r
		}
		n, err := f.stream.Read(p)
		f.off += int64(n)
		f.state.fetched.Add(int64(n))
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, io.EOF) && f.off >= f.size:
			return n, io.EOF
		case n > 0:
			// Cut, or ended early, after some bytes: the next Read asks
			// for the rest.
			f.stream.Close()
			f.stream = nil
			return n, nil
		}
		// Cut before a byte came: ask again for the rest, a bounded number of times.
		f.stream.Close()
		f.stream = nil
		if attempt == readAttempts || f.ctx.Err() != nil {
			return 0, f.readError(err)
		}
	}
}

func (f *objectFile) Seek(offset int64, whence int) (int64, error) {
	to := offset
	switch whence {
	case io.SeekCurrent:
		to += f.off
	case io.SeekEnd:
		to += f.size
	}
	if to < 0 {
		return f.off, fmt.Errorf("storage: %s: seek to %d", redact(f.name), to)
	}
	if to != f.off && f.stream != nil {
		f.stream.Close()
		f.stream = nil
	}
	f.off = to
	return to, nil
}

func (f *objectFile) Close() error {
	if f.stream != nil {
		err := f.stream.Close()
		f.stream = nil
		return err
	}
	return nil
}
