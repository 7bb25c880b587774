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
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

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

// ReadFile returns the content of a file or object.
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

// Entry is a file of a folder listing.
type Entry struct {
	Name string // relative to the folder, with / between folders
	Size int64
}

// List returns the files directly in a folder (a path, or a URL whose key
// is a prefix ending in /): one listing request per thousand objects on
// object storage. A folder that does not exist is empty.
func (o *Opener) List(ctx context.Context, dir string) ([]Entry, error) {
	if !IsURL(dir) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var out []Entry
		for _, e := range entries {
			if e.Type().IsRegular() {
				info, err := e.Info()
				if err != nil {
					continue // removed meanwhile
				}
				out = append(out, Entry{Name: e.Name(), Size: info.Size()})
			}
		}
		return out, nil
	}
	if isHTTP(dir) {
		return nil, fmt.Errorf("storage: %s: %w", redact(dir), errReadOnly)
	}
	ob, b, err := o.open(ctx, dir)
	if err != nil {
		return nil, err
	}
	objs, err := listAll(ctx, b, &blob.ListOptions{Prefix: folderKey(ob.key), Delimiter: "/"})
	if err != nil {
		return nil, objectError(dir, err)
	}
	out := make([]Entry, len(objs))
	for i, obj := range objs {
		out[i] = Entry{Name: strings.TrimPrefix(obj.Key, folderKey(ob.key)), Size: obj.Size}
	}
	return out, nil
}

// Walk returns every object under a folder URL, in its folders too (one
// listing request per thousand objects), named relative to it with /
// between folders. It is for object storage: a local folder is walked
// with the os package, whose links and file types matter.
func (o *Opener) Walk(ctx context.Context, dir string) ([]Entry, error) {
	if !IsURL(dir) || isHTTP(dir) {
		return nil, fmt.Errorf("storage: %s: Walk lists object storage", redact(dir))
	}
	ob, b, err := o.open(ctx, dir)
	if err != nil {
		return nil, err
	}
	objs, err := listAll(ctx, b, &blob.ListOptions{Prefix: folderKey(ob.key)})
	if err != nil {
		return nil, objectError(dir, err)
	}
	out := make([]Entry, len(objs))
	for i, obj := range objs {
		out[i] = Entry{Name: strings.TrimPrefix(obj.Key, folderKey(ob.key)), Size: obj.Size}
	}
	return out, nil
}

// listAll returns the objects (not the folders) a listing names. A
// listing response cut mid-body (the SDK does not retry a body it cannot
// parse) asks for the listing again from its start, a bounded number of
// times.
func listAll(ctx context.Context, b *blob.Bucket, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	opts.BeforeList = func(as func(any) bool) error { quiet(as); return nil }
	for attempt := 1; ; attempt++ {
		var out []*blob.ListObject
		it := b.List(opts)
		for {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				if attempt == readAttempts || ctx.Err() != nil || !retryable(err) {
					return nil, err
				}
				break
			}
			if !obj.IsDir {
				out = append(out, obj)
			}
		}
	}
}

// MkdirAll makes a local folder and its parents; object stores have no
// folders, and need none.
func MkdirAll(dir string) error {
	if IsURL(dir) {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// IsFolder reports whether name is written as a folder: a path or a URL's
// key that ends in /.
func IsFolder(name string) bool {
	if IsURL(name) {
		name, _, _ = strings.Cut(name, "?")
		return strings.HasSuffix(name, "/")
	}
	return strings.HasSuffix(name, "/") || strings.HasSuffix(name, string(filepath.Separator))
}

// Join names the file elem in folder dir: a path, or a URL with the key
// joined (elem escaped, as a key is in a URL) and the query kept.
func Join(dir, elem string) string {
	if !IsURL(dir) {
		return filepath.Join(dir, elem)
	}
	base, query, _ := strings.Cut(dir, "?")
	u := strings.TrimSuffix(base, "/") + "/" + escapeKey(elem)
	if query != "" {
		u += "?" + query
	}
	return u
}

// Split splits name into its folder (a URL's ends in /, with the query
// kept) and its last element (a URL's unescaped: Join puts it back).
func Split(name string) (dir, elem string) {
	if !IsURL(name) {
		clean := filepath.Clean(name)
		return filepath.Dir(clean), filepath.Base(clean)
	}
	base, query, _ := strings.Cut(name, "?")
	scheme, rest, _ := strings.Cut(base, "://")
	bucket, key, _ := strings.Cut(rest, "/")
	key = strings.TrimSuffix(key, "/")
	parent, elem := path.Split(key)
	dir = scheme + "://" + bucket + "/" + parent
	if query != "" {
		dir += "?" + query
	}
	if raw, err := url.PathUnescape(elem); err == nil {
		elem = raw
	}
	return dir, elem
}

// Key returns a URL without its query (the object it names, whatever the
// settings it is read with), or a path made absolute: what two names of
// the same file have in common.
func Key(name string) string {
	if IsURL(name) {
		base, _, _ := strings.Cut(name, "?")
		return base
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return name
	}
	return abs
}

// SameFile reports whether two names are the same file: the same object
// (URLs whatever their query), or the same local file, by path or as the
// file system knows it (links, other spellings).
func SameFile(a, b string) bool {
	if Key(a) == Key(b) {
		return true
	}
	if IsURL(a) || IsURL(b) {
		return false
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// folderKey is key as a listing prefix: empty (the bucket), or ending in /.
func folderKey(key string) string {
	if key == "" || strings.HasSuffix(key, "/") {
		return key
	}
	return key + "/"
}

// RemoveAll removes a folder and everything below it: a local folder, or
// every object under a URL's prefix.
func (o *Opener) RemoveAll(ctx context.Context, dir string) error {
	if !IsURL(dir) {
		return os.RemoveAll(dir)
	}
	if isHTTP(dir) {
		return fmt.Errorf("storage: %s: %w", redact(dir), errReadOnly)
	}
	ob, b, err := o.open(ctx, dir)
	if err != nil {
		return err
	}
	objs, err := listAll(ctx, b, &blob.ListOptions{Prefix: folderKey(ob.key)})
	if err != nil {
		return objectError(dir, err)
	}
	for _, obj := range objs {
		if err := b.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return objectError(ob.name(obj.Key), err)
		}
	}
	return nil
}
