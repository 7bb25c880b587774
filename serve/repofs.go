package serve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drainpipe/drainpipe/storage"
)

// repoFS is where a repository's folders are: a local folder, or a
// prefix of object storage (an s3://, gs:// or azblob:// URL, its driver
// imported by the program), read by listing.
type repoFS interface {
	// dirs returns the folders directly in dir that are not hidden (links
	// to folders too), and whether dir exists.
	dirs(ctx context.Context, dir string) ([]string, bool, error)
	// file returns what a model file is: fs.ErrNotExist if there is
	// none, an error if it is not a regular file of at most limit bytes.
	file(ctx context.Context, path string, limit int64) (fileState, error)
	// read reads a regular file of at most limit bytes.
	read(ctx context.Context, path string, limit int64) ([]byte, error)
	join(dir, name string) string
}

func newRepoFS(dir string) repoFS {
	if storage.IsURL(dir) {
		return objectFS{}
	}
	return localFS{}
}

// localFS is a repository on the local file system.
type localFS struct{}

func (localFS) join(dir, name string) string { return filepath.Join(dir, name) }

func (localFS) dirs(_ context.Context, dir string) ([]string, bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && st.IsDir() { // links followed
			out = append(out, e.Name())
		}
	}
	return out, true, nil
}

func (localFS) file(_ context.Context, path string, limit int64) (fileState, error) {
	st, err := os.Stat(path) // a link is followed to what it names
	if err != nil {
		return fileState{}, err
	}
	if !st.Mode().IsRegular() {
		return fileState{}, fmt.Errorf("%s is not a regular file (%s): a model is read from a file of a known size", path, st.Mode().Type())
	}
	if st.Size() > limit {
		return fileState{}, fmt.Errorf("%s holds %d bytes, over the %d a model file may", path, st.Size(), limit)
	}
	return fileState{path: path, size: st.Size(), mod: st.ModTime()}, nil
}

func (localFS) read(_ context.Context, path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, limit)
	}
	return os.ReadFile(path)
}

// objectFS is a repository on object storage: a folder is a prefix,
// listed; a file's version is its ETag. Each call opens the store anew
// and closes it: a poll is a few calls every few seconds.
type objectFS struct{}

func (objectFS) join(dir, name string) string { return storage.Join(dir, name) }

func (objectFS) dirs(ctx context.Context, dir string) ([]string, bool, error) {
	store := storage.NewOpener()
	defer store.Close()
	entries, err := store.Walk(ctx, dir)
	if err != nil {
		return nil, false, err
	}
	var out []string
	for _, e := range entries {
		first, _, isDir := strings.Cut(e.Name, "/")
		if isDir && !strings.HasPrefix(first, ".") && !slices.Contains(out, first) {
			out = append(out, first)
		}
	}
	slices.Sort(out)
	return out, len(entries) > 0, nil
}

func (objectFS) file(ctx context.Context, path string, limit int64) (fileState, error) {
	store := storage.NewOpener()
	defer store.Close()
	info, err := store.Stat(ctx, path)
	if errors.Is(err, storage.ErrNotFound) {
		return fileState{}, fs.ErrNotExist
	}
	if err != nil {
		return fileState{}, err
	}
	if info.Size > limit {
		return fileState{}, fmt.Errorf("%s holds %d bytes, over the %d a model file may", path, info.Size, limit)
	}
	return fileState{path: path, size: info.Size, etag: info.ETag}, nil
}

func (o objectFS) read(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := o.file(ctx, path, limit)
	if err != nil {
		return nil, err
	}
	store := storage.NewOpener()
	defer store.Close()
	data, err := store.ReadFile(ctx, path)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fs.ErrNotExist
	}
	if err == nil && int64(len(data)) != f.size {
		err = fmt.Errorf("%s: %d bytes read, %d listed (replaced meanwhile)", path, len(data), f.size)
	}
	return data, err
}
