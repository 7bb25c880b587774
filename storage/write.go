package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/drainpipe/drainpipe/internal/atomicfile"
)

// ErrExists reports a file or object that exists, where a write may not
// replace it.
var ErrExists = errors.New("exists already")

// Writer writes one file or object that appears whole at Commit, or not
// at all: a local file is written aside and renamed into place; an object
// is uploaded (in parts when large) and exists once the upload completes,
// so an Abort, a failure or a killed process leaves no object.
type Writer struct {
	name    string
	replace bool
	local   *atomicfile.File
	buf     *bufio.Writer // in front of local
	obj     *blob.Writer
	cancel  context.CancelFunc // aborts obj's upload
	// ours tells, after a conditional write refused, whether the object
	// there is this write's own (its first try done, its answer lost).
	ours func() bool
	size int64
	done bool
}

// localBuffer is the bytes a local file's writes gather before a system
// call.
const localBuffer = 256 << 10

// Create starts writing name, a path or URL. Without replace, Commit fails
// with ErrExists if name exists by then (for an object, a conditional
// write: If-None-Match, so of two writers one wins).
func (o *Opener) Create(ctx context.Context, name string, replace bool) (*Writer, error) {
	w := &Writer{name: name, replace: replace}
	if isHTTP(name) {
		return nil, fmt.Errorf("storage: %s: %w", redact(name), errReadOnly)
	}
	if !IsURL(name) {
		f, err := atomicfile.Create(name)
		if err != nil {
			return nil, err
		}
		// Encoders write a record as many small buffers (an IPC record
		// batch is a dozen); a system call each cost a job writing
		// one-batch records a tenth of its time.
		w.local, w.buf = f, bufio.NewWriterSize(f, localBuffer)
		return w, nil
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return nil, err
	}
	// The upload's own context: Abort, or ctx ending, ends it, and an
	// upload ended before Commit creates nothing.
	ctx, w.cancel = context.WithCancel(ctx)
	opts, ours := writeOptions(ctx, b, ob.key, replace)
	w.ours = ours
	obj, err := b.NewWriter(ctx, ob.key, opts)
	if err != nil {
		w.cancel()
		return nil, objectError(name, err)
	}
	w.obj = obj
	return w, nil
}

// Name returns the path or URL written.
func (w *Writer) Name() string { return w.name }

// Size returns the bytes written.
func (w *Writer) Size() int64 { return w.size }

func (w *Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("storage: %s: write after Commit or Abort", redact(w.name))
	}
	var n int
	var err error
	if w.local != nil {
		n, err = w.buf.Write(p)
	} else {
		n, err = w.obj.Write(p)
	}
	w.size += int64(n)
	if err != nil && w.obj != nil {
		err = writeError(w.name, err)
	}
	return n, err
}

// Commit makes what was written the file or object.
func (w *Writer) Commit() error {
	if w.done {
		return fmt.Errorf("storage: %s: committed or aborted already", redact(w.name))
	}
	w.done = true
	if w.local != nil {
		if err := w.buf.Flush(); err != nil {
			w.local.Abort()
			return err
		}
		err := w.local.Commit(w.replace)
		if errors.Is(err, atomicfile.ErrExists) {
			return fmt.Errorf("%w: %s", ErrExists, w.name)
		}
		return err
	}
	defer w.cancel()
	if err := closeObject(w.obj); err != nil {
		if err = writeError(w.name, err); errors.Is(err, ErrExists) && w.ours() {
			return nil
		}
		return err
	}
	return nil
}

// writeMark is the metadata key of a conditional write's token.
const writeMark = "drainpipewrite"

// writeOptions returns an upload's options and, for a conditional write
// (If-None-Match), a function telling whether the object there is this
// upload's own: the SDK retries a write whose answer was lost, and the
// retry is refused by the object the first try made. A token in the
// object's metadata tells the two apart.
func writeOptions(ctx context.Context, b *blob.Bucket, key string, replace bool) (*blob.WriterOptions, func() bool) {
	opts := &blob.WriterOptions{IfNotExist: !replace, ContentType: "application/octet-stream"}
	if replace {
		return opts, func() bool { return false }
	}
	token := make([]byte, 16)
	rand.Read(token)
	mark := hex.EncodeToString(token)
	opts.Metadata = map[string]string{writeMark: mark}
	return opts, func() bool {
		attrs, err := b.Attributes(ctx, key)
		return err == nil && attrs.Metadata[writeMark] == mark
	}
}

// closeObject closes an upload, a panic of the driver's included (Azure's
// writer panics on some failed uploads) as an error.
func closeObject(obj *blob.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the upload failed: %v", p)
		}
	}()
	return obj.Close()
}

// Abort discards what was written. It is a no-op after Commit.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.local != nil {
		w.local.Abort()
		return
	}
	w.cancel() // an upload whose context ends before Close creates nothing
	closeObject(w.obj)
}

func writeError(name string, err error) error {
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%w: %s", ErrExists, redact(name))
	}
	return objectError(name, err)
}

// WriteFile writes data to name whole (atomically, durably), replacing
// what is there if replace is set; else ErrExists if name exists.
func (o *Opener) WriteFile(ctx context.Context, name string, data []byte, replace bool) error {
	if IsURL(name) && !isHTTP(name) {
		// One upload of known bytes (the drivers' Upload path), not a
		// stream: gocloud.dev's Azure writer panics closing a stream whose
		// conditional write was refused.
		ob, b, err := o.open(ctx, name)
		if err != nil {
			return err
		}
		opts, ours := writeOptions(ctx, b, ob.key, replace)
		err = b.Upload(ctx, ob.key, bytes.NewReader(data), opts)
		if err != nil {
			if err = writeError(name, err); errors.Is(err, ErrExists) && ours() {
				return nil
			}
			return err
		}
		return nil
	}
	w, err := o.Create(ctx, name, replace)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// ReadFile returns the content of a file or object: of the version
// Expect pinned, if it pinned one (ErrChanged if it is gone).
func (o *Opener) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if !IsURL(name) {
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return data, err
	}
	if isHTTP(name) {
		f, err := o.openHTTP(ctx, name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	if o.isPinned(name) {
		f, err := o.Open(ctx, name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return nil, err
	}
	r, err := b.NewReader(ctx, ob.key, quietRead)
	if err != nil {
		return nil, objectError(name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, objectError(name, err)
	}
	return data, nil
}

// isPinned reports an object Expect pinned: ReadFile reads it at that
// version. (Other objects an Opener looked at are read as they are now:
// a job rereads the files it writes.)
func (o *Opener) isPinned(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.objects[name]
	return st != nil && st.byExpect
}

// Remove removes a file or object; one that does not exist is no error.
func (o *Opener) Remove(ctx context.Context, name string) error {
	if !IsURL(name) {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if isHTTP(name) {
		return fmt.Errorf("storage: %s: %w", redact(name), errReadOnly)
	}
	ob, b, err := o.open(ctx, name)
	if err != nil {
		return err
	}
	if err := b.Delete(ctx, ob.key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return objectError(name, err)
	}
	return nil
}
