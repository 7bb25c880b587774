package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// Names in a parts folder. A folder output keeps its manifest, beside the
// parts, under a name that readers of *.parquet globs and of Spark-style
// folders pass over.
const (
	manifestName       = "manifest.json"
	folderManifestName = storage.ManifestName
	successName        = storage.SuccessName
)

// layout is where a job's parts live and what they become.
type layout struct {
	dir    string // a local folder, or an object prefix's URL (ending in /)
	folder bool   // the parts are the output: Parquet files and a _SUCCESS marker
	store  *storage.Opener
	// ctx is the run's, without its cancellation: what is left in order
	// after a cancelled run (a manifest, a cleared folder) is still done.
	ctx context.Context
	// live is the run's context itself, for the uploads a cancelled run
	// abandons (a part, the streamed output): they create nothing.
	live context.Context
	// fence, if set, reports an error once the job no longer holds its
	// output's lock: every commit (a part, the manifest, the marker, the
	// output file) asks it first.
	fence func() error
	// groupBytes bounds the Parquet files' row groups (rowGroupBytes).
	groupBytes int64
}

// rowGroupBytes bounds the Arrow buffers of a Parquet output's row group,
// which the sink holds until the group is whole, and then beside the
// group's encoded pages (about as many bytes again, at most): the sink's
// default, or an eighth of MaxMemory where that is less, so the two stay
// within a quarter (the reader's window of an input file has MaxMemory;
// the device's memory and the predictions in flight need theirs). 0: the
// sink's default.
func rowGroupBytes(maxMemory int64) int64 {
	if maxMemory > 0 {
		return max(min(sink.DefaultRowGroupBytes, maxMemory/8), 1)
	}
	return 0
}

// fenced asks the fence, if any.
func (l layout) fenced() error {
	if l.fence == nil {
		return nil
	}
	return l.fence()
}

// path names a file of the parts folder.
func (l layout) path(name string) string { return storage.Join(l.dir, name) }

func (l layout) manifest() string {
	if l.folder {
		return l.path(folderManifestName)
	}
	return l.path(manifestName)
}

func (l layout) partName(i int) string {
	if l.folder {
		return fmt.Sprintf("part-%05d.parquet", i)
	}
	return fmt.Sprintf("part-%06d.arrow", i)
}

// ours reports whether a file of the folder is the job's: a part, the
// manifest, the marker, or a temporary file of one of them.
func (l layout) ours(name string) bool {
	name = strings.TrimPrefix(name, ".")
	return strings.HasPrefix(name, "part-") || strings.HasPrefix(name, manifestName) ||
		strings.HasPrefix(name, folderManifestName) || strings.HasPrefix(name, successName)
}

// clear removes the job's files from the folder, and the folder too when
// nothing else is in it.
func (l layout) clear() error {
	if !l.folder {
		return l.store.RemoveAll(l.ctx, l.dir)
	}
	entries, err := l.store.List(l.ctx, l.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if l.ours(e.Name) {
			if err := l.store.Remove(l.ctx, l.path(e.Name)); err != nil {
				return err
			}
		}
	}
	if !storage.IsURL(l.dir) {
		os.Remove(l.dir) // only if empty
	}
	return nil
}

// parts is the folder of durable parts of one job.
type parts struct {
	layout
	m       manifest
	version storage.Version // of the manifest, as this run last read or wrote it (objects)
	saves   int
	inject  func(phase string, n int) error // tests' failures
}

// openParts prepares the parts folder: a fresh one, the interrupted run's
// (resume), or a fresh one in place of it (overwrite).
func openParts(l layout, fingerprint string, partRows int, resume, overwrite bool) (*parts, error) {
	p := &parts{layout: l, m: manifest{Version: 1, Fingerprint: fingerprint, PartRows: partRows}}
	data, version, err := l.readManifest()
	switch {
	case err == nil && resume:
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("job: %s: %w", l.manifest(), err)
		}
		if m.Fingerprint != fingerprint || m.PartRows != partRows {
			return nil, fmt.Errorf("%w (%s)", ErrChanged, l.dir)
		}
		p.m, p.version = m, version
	case err == nil && overwrite:
		if err := l.clear(); err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
	case err == nil:
		return nil, fmt.Errorf("%w: %s", ErrInterrupted, l.dir)
	case !errors.Is(err, storage.ErrNotFound):
		return nil, fmt.Errorf("job: %w", err)
	}
	if err := storage.MkdirAll(l.dir); err != nil {
		return nil, fmt.Errorf("job: output folder: %w", err)
	}
	entries, err := l.store.List(l.ctx, l.dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	if err := p.check(entries); err != nil {
		return nil, err
	}
	// A part whose writing was interrupted never reached the manifest.
	for _, e := range entries {
		if l.ours(e.Name) && !p.listed(e.Name) && l.path(e.Name) != l.manifest() {
			l.store.Remove(l.ctx, l.path(e.Name))
		}
	}
	return p, p.save() // also proves the folder is writable
}

// check proves the committed parts are there, each of the size the
// manifest gives it, against a listing of the folder: a part lost or
// replaced since is an error, never a hole in the output.
func (p *parts) check(entries []storage.Entry) error {
	sizes := make(map[string]int64, len(entries))
	for _, e := range entries {
		sizes[e.Name] = e.Size
	}
	for _, pt := range p.m.Parts {
		for _, f := range []struct {
			name string
			size int64
		}{{pt.File, pt.Size}, {pt.Aside, pt.AsideSize}} {
			if f.name == "" {
				continue
			}
			got, ok := sizes[f.name]
			switch {
			case !ok:
				return fmt.Errorf("%w: %s, listed in the manifest, is gone", ErrPartsDamaged, p.path(f.name))
			case f.size > 0 && got != f.size:
				return fmt.Errorf("%w: %s holds %d bytes, the manifest says %d", ErrPartsDamaged, p.path(f.name), got, f.size)
			}
		}
	}
	return nil
}

// finished reports whether the parts folder holds the manifest of this job
// with a complete output (a file output written, or a folder output's
// _SUCCESS), and returns the rows the parts held. For a file output, which
// the caller found complete and naming this job, it removes what is left
// of the parts, manifest or none: a removal cut short (by a kill, on an
// object store where it is a request an object) leaves parts without one.
func finished(l layout, fingerprint string) (int64, bool) {
	var p *parts
	if data, err := l.store.ReadFile(l.ctx, l.manifest()); err == nil {
		p = &parts{layout: l}
		if json.Unmarshal(data, &p.m) != nil || p.m.Fingerprint != fingerprint {
			p = nil
		}
	}
	if l.folder {
		if p == nil {
			return 0, false
		}
		if _, err := l.store.Stat(l.ctx, l.path(successName)); err != nil {
			return 0, false
		}
		return p.rows(), true
	}
	if err := l.store.RemoveAll(l.ctx, l.dir); err != nil || p == nil {
		return 0, false
	}
	return p.rows(), true
}

func (p *parts) listed(name string) bool {
	for _, pt := range p.m.Parts {
		if name != "" && (pt.File == name || pt.Aside == name) {
			return true
		}
	}
	return false
}

// inEnd returns where the input resumes: the end of the last part's rows.
func (p *parts) inEnd() int64 {
	if len(p.m.Parts) == 0 {
		return 0
	}
	return p.m.Parts[len(p.m.Parts)-1].InEnd
}

// asideRows returns the rows set aside in the committed parts.
func (p *parts) asideRows() int64 {
	var n int64
	for _, pt := range p.m.Parts {
		n += pt.AsideRows
	}
	return n
}

// asideName names the set-aside rows of part i.
func asideName(i int) string { return fmt.Sprintf("aside-%06d.arrow", i) }

// rows returns the rows the completed parts hold.
func (p *parts) rows() int64 {
	var n int64
	for _, pt := range p.m.Parts {
		n += pt.Rows
	}
	return n
}

// add records a committed part.
func (p *parts) add(pt part) error {
	p.m.Parts = append(p.m.Parts, pt)
	return p.save()
}

// merge writes every part, in order, to output (in records as the parts
// hold them, in row groups of the sink's size), then removes the parts
// folder. The output has the parts' schema, or empty's when there are no
// parts.
func (p *parts) merge(output string, empty func() (*arrow.Schema, error), overwrite bool, mem memory.Allocator) error {
	ds, err := p.dataset(empty, mem)
	if err != nil {
		return err
	}
	// The output names the job that wrote it, so a resume of a complete job
	// can tell, once the parts are gone.
	md := arrow.NewMetadata([]string{jobKey}, []string{p.m.Fingerprint})
	schema := arrow.NewSchema(ds.Schema().Fields(), &md)
	w, err := sink.Create(output, schema, sink.WithOverwrite(overwrite), sink.WithAllocator(mem), sink.WithOpener(p.store), sink.WithRowGroupBytes(p.groupBytes))
	if err != nil {
		return err
	}
	if _, err := dataset.Copy(&injecting{w, p.inject, "merge", 0}, ds.Records()); err != nil {
		w.Abort()
		return fmt.Errorf("job: merge parts: %w", err)
	}
	if err := p.fenced(); err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	return p.store.RemoveAll(p.ctx, p.dir)
}

// mergeAside writes every part's set-aside rows, in order, to path
// (replacing an earlier attempt's), or an empty file of schema.
func (p *parts) mergeAside(path string, schema *arrow.Schema, mem memory.Allocator) error {
	var files []string
	for _, pt := range p.m.Parts {
		if pt.Aside != "" {
			files = append(files, p.path(pt.Aside))
		}
	}
	ds := dataset.FromRecords(schema)
	if len(files) > 0 {
		var err error
		if ds, err = fileset.Read(files, fileset.WithFormat(format.IPCFile), fileset.WithAllocator(mem), fileset.WithOpener(p.store)); err != nil {
			return err
		}
	}
	w, err := sink.Create(path, ds.Schema(), sink.WithOverwrite(true), sink.WithAllocator(mem), sink.WithOpener(p.store))
	if err != nil {
		return err
	}
	if _, err := dataset.Copy(w, ds.Batches(mem, rowGroupRows)); err != nil {
		w.Abort()
		return fmt.Errorf("job: merge the rows set aside: %w", err)
	}
	if err := p.fenced(); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

// injecting is a writer that fails where a test says (phase, nth write).
type injecting struct {
	dataset.Writer
	inject func(phase string, n int) error
	phase  string
	n      int
}

func (w *injecting) Write(rec arrow.RecordBatch) error {
	if w.inject != nil {
		if err := w.inject(w.phase, w.n); err != nil {
			return err
		}
	}
	w.n++
	return w.Writer.Write(rec)
}

// dataset reads the parts in order; with no parts, it is empty, of the
// schema empty gives.
func (p *parts) dataset(empty func() (*arrow.Schema, error), mem memory.Allocator) (*dataset.Dataset, error) {
	if len(p.m.Parts) == 0 {
		schema, err := empty()
		if err != nil {
			return nil, err
		}
		return dataset.FromRecords(schema), nil
	}
	var files []string
	for _, pt := range p.m.Parts {
		if pt.File != "" {
			files = append(files, p.path(pt.File))
		}
	}
	if len(files) == 0 {
		schema, err := empty()
		if err != nil {
			return nil, err
		}
		return dataset.FromRecords(schema), nil
	}
	return fileset.Read(files, fileset.WithFormat(format.IPCFile), fileset.WithAllocator(mem), fileset.WithOpener(p.store))
}

// rowGroupRows is the row-group size of the merged output.
const rowGroupRows = 1 << 16
