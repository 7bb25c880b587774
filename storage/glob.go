package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/drainpipe/drainpipe/format"
	"gocloud.dev/blob"
)

// Glob returns the files or objects a pattern names, sorted:
//   - a local glob, or a URL whose key holds glob characters, matched
//     against a listing of the keys under the pattern's literal prefix;
//   - and ? stay within a folder, ** spans folders (doublestar syntax);
//   - a folder (a local directory, or a URL whose key ends in /): the data
//     files below it (names a format is known for), passing over names
//     that start with _ or . (markers, temporary files); a folder holding
//     _manifest.json but no _SUCCESS, an output still being written, is
//     refused;
//   - any other name, if it exists; an object so named is pinned (see
//     [Opener.Pin]).
func (o *Opener) Glob(ctx context.Context, pattern string) ([]string, error) {
	if !IsURL(pattern) {
		return o.globLocal(pattern)
	}
	if isHTTP(pattern) {
		if IsFolder(pattern) || strings.ContainsAny(pattern, "*?[{") {
			return nil, fmt.Errorf("storage: %s: %w", redact(pattern), errReadOnly)
		}
		if _, err := o.Pin(ctx, pattern); err != nil {
			return nil, err
		}
		return []string{pattern}, nil
	}
	ob, b, err := o.open(ctx, pattern)
	if err != nil {
		return nil, err
	}
	folder := ob.key == "" || strings.HasSuffix(ob.key, "/")
	// A ? in a URL starts its query: in a key (written %3F) it is a
	// character of the name, never a glob's.
	if !folder && !strings.ContainsAny(ob.key, urlGlobChars) {
		// The look pins the object, as its reader's first would: the
		// reads after it need no look of their own.
		if _, err := o.Pin(ctx, pattern); err != nil {
			return nil, err
		}
		return []string{pattern}, nil
	}
	literal := strings.NewReplacer(`\`, `\\`, "?", `\?`)
	keyPattern, prefix := literal.Replace(ob.key)+"**", ob.key
	if !folder {
		keyPattern, prefix = literal.Replace(ob.key), ob.key[:strings.IndexAny(ob.key, urlGlobChars)]
		if !doublestar.ValidatePattern(keyPattern) {
			return nil, fmt.Errorf("storage: pattern %q: %w", redact(pattern), doublestar.ErrBadPattern)
		}
	}
	objs, err := listAll(ctx, b, &blob.ListOptions{Prefix: prefix})
	if err != nil {
		return nil, objectError(pattern, err)
	}
	var keys []string
	for _, obj := range objs {
		keys = append(keys, obj.Key)
	}
	if folder {
		if err := finished(keys, prefix, pattern); err != nil {
			return nil, err
		}
		if named, ok, err := o.manifestFiles(ctx, pattern, keys, prefix); ok || err != nil {
			return named, err
		}
	}
	var out []string
	for _, key := range keys {
		if ok, _ := doublestar.Match(keyPattern, key); ok && (!folder || dataFile(key)) {
			out = append(out, ob.name(key))
		}
	}
	slices.Sort(out)
	return out, nil
}

// urlGlobChars are the glob characters of a URL's key.
const urlGlobChars = "*[{"

func (o *Opener) globLocal(pattern string) ([]string, error) {
	if strings.ContainsAny(pattern, "*?[{") {
		if !doublestar.ValidatePattern(filepath.ToSlash(pattern)) {
			return nil, fmt.Errorf("storage: pattern %q: %w", pattern, doublestar.ErrBadPattern)
		}
		return doublestar.FilepathGlob(pattern, doublestar.WithFilesOnly())
	}
	st, err := os.Stat(pattern)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, pattern)
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{pattern}, nil
	}
	var names, files []string
	err = filepath.WalkDir(pattern, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != pattern && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(pattern, path)
			names = append(names, filepath.ToSlash(rel))
			if dataFile(rel) {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := finished(names, "", pattern); err != nil {
		return nil, err
	}
	if named, ok, err := o.manifestFiles(context.Background(), pattern, names, ""); ok || err != nil {
		return named, err
	}
	slices.Sort(files)
	return files, nil
}

// dataFile reports whether a file or key names data a format is known for,
// and is not a marker or temporary file (a name starting with _ or .).
func dataFile(name string) bool {
	base := path.Base(filepath.ToSlash(name))
	if strings.HasPrefix(base, "_") || strings.HasPrefix(base, ".") {
		return false
	}
	_, err := format.Of(base)
	return err == nil
}

// finished refuses a folder that holds an output still being written: a
// _manifest.json at its top without a _SUCCESS.
func finished(names []string, prefix, folder string) error {
	if slices.Contains(names, prefix+ManifestName) && !slices.Contains(names, prefix+SuccessName) {
		return fmt.Errorf("storage: %s holds an output still being written (a _manifest.json, no _SUCCESS)", redact(folder))
	}
	return nil
}

// manifestFiles returns the files a finished output folder's manifest
// names, in its order, when it has one (_manifest.json beside _SUCCESS):
// the dataset the writer committed, not whatever else the folder holds,
// such as the files of an earlier run of more shards. names is the
// folder's listing (keys under prefix, for an object store).
func (o *Opener) manifestFiles(ctx context.Context, folder string, names []string, prefix string) ([]string, bool, error) {
	if !slices.Contains(names, prefix+ManifestName) || !slices.Contains(names, prefix+SuccessName) {
		return nil, false, nil
	}
	data, err := o.ReadFile(ctx, Join(folder, ManifestName))
	if err != nil {
		return nil, true, err
	}
	var m struct {
		Parts []ManifestPart `json:"parts"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, true, fmt.Errorf("storage: %s: unreadable _manifest.json: %w", redact(folder), err)
	}
	var out []string
	for _, f := range m.Parts {
		if f.File == "" {
			continue // a part whose rows were all set aside
		}
		if !slices.Contains(names, prefix+f.File) {
			return nil, true, fmt.Errorf("storage: %s: its _manifest.json names %s, which is not there", redact(folder), f.File)
		}
		out = append(out, Join(folder, f.File))
	}
	// A manifest is the whole of the dataset, even when it names no file
	// (every row set aside): the folder's other files, a stale part or
	// the rows set aside, are never data.
	return out, true, nil
}
