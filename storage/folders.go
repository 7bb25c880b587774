package storage

import (
	"context"
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
)

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
