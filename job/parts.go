package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/internal/atomicfile"
	"github.com/drainpipe/drainpipe/sink"
)

// manifest lists the completed parts of a job.
type manifest struct {
	Version     int    `json:"version"`
	Fingerprint string `json:"fingerprint"`
	PartRows    int    `json:"part_rows"`
	Parts       []part `json:"parts"`
}

type part struct {
	File string `json:"file,omitempty"` // name inside the parts folder; none if no row was predicted
	Rows int64  `json:"rows"`
	// InEnd is the end of the input rows (counted over every row read) the
	// part covers: a resume reads on from there.
	InEnd int64 `json:"in_end"`
	// Aside names the part's rows set aside, if any (SetAside mode).
	Aside     string `json:"aside,omitempty"`
	AsideRows int64  `json:"aside_rows,omitempty"`
}

// Names in a parts folder. A folder output keeps its manifest, beside the
// parts, under a name that readers of *.parquet globs and of Spark-style
// folders pass over.
const (
	manifestName       = "manifest.json"
	folderManifestName = "_manifest.json"
	successName        = "_SUCCESS"
)

// layout is where a job's parts live and what they become.
type layout struct {
	dir    string
	folder bool // the parts are the output: Parquet files and a _SUCCESS marker
}

func (l layout) manifest() string {
	if l.folder {
		return filepath.Join(l.dir, folderManifestName)
	}
	return filepath.Join(l.dir, manifestName)
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
		return os.RemoveAll(l.dir)
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if l.ours(e.Name()) {
			if err := os.Remove(filepath.Join(l.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	os.Remove(l.dir) // only if empty
	return nil
}

// parts is the folder of durable parts of one job.
type parts struct {
	layout
	m      manifest
	saves  int
	inject func(phase string, n int) error // tests' failures
}

// openParts prepares the parts folder: a fresh one, the interrupted run's
// (resume), or a fresh one in place of it (overwrite).
func openParts(l layout, fingerprint string, partRows int, resume, overwrite bool) (*parts, error) {
	p := &parts{layout: l, m: manifest{Version: 1, Fingerprint: fingerprint, PartRows: partRows}}
	data, err := os.ReadFile(l.manifest())
	switch {
	case err == nil && resume:
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("job: %s: %w", l.manifest(), err)
		}
		if m.Fingerprint != fingerprint || m.PartRows != partRows {
			return nil, fmt.Errorf("%w (%s)", ErrChanged, l.dir)
		}
		p.m = m
	case err == nil && overwrite:
		if err := l.clear(); err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
	case err == nil:
		return nil, fmt.Errorf("%w: %s", ErrInterrupted, l.dir)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("job: %w", err)
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("job: output folder: %w", err)
	}
	// A part whose writing was interrupted never reached the manifest.
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	for _, e := range entries {
		if l.ours(e.Name()) && !p.listed(e.Name()) && filepath.Join(l.dir, e.Name()) != l.manifest() {
			os.Remove(filepath.Join(l.dir, e.Name()))
		}
	}
	return p, p.save() // also proves the folder is writable
}

// finished reports whether the parts folder holds the manifest of this job
// with a complete output (a file output written, or a folder output's
// _SUCCESS); for a file output it removes the parts. It returns the rows
// the parts held.
func finished(l layout, fingerprint string) (int64, bool) {
	data, err := os.ReadFile(l.manifest())
	if err != nil {
		return 0, false
	}
	p := &parts{layout: l}
	if json.Unmarshal(data, &p.m) != nil || p.m.Fingerprint != fingerprint {
		return 0, false
	}
	if l.folder {
		if _, err := os.Stat(filepath.Join(l.dir, successName)); err != nil {
			return 0, false
		}
	} else if err := os.RemoveAll(l.dir); err != nil {
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

// save replaces the manifest atomically and durably.
func (p *parts) save() error {
	data, err := json.MarshalIndent(p.m, "", "  ")
	if err != nil {
		return err
	}
	p.saves++
	if p.inject != nil {
		err = p.inject("manifest", p.saves-1)
	}
	if err == nil {
		err = atomicfile.WriteFile(p.manifest(), data)
	}
	if err != nil {
		return fmt.Errorf("job: manifest: %w", err)
	}
	return nil
}

// seal finishes a folder output: an empty part if there is none (so the
// folder reads as a dataset of the output's schema), then _SUCCESS.
func (p *parts) seal(empty func() (*arrow.Schema, error), mem memory.Allocator) error {
	if len(p.m.Parts) == 0 {
		schema, err := empty()
		if err != nil {
			return err
		}
		w, err := sink.Create(filepath.Join(p.dir, p.partName(0)), schema, sink.WithOverwrite(true), sink.WithAllocator(mem))
		if err != nil {
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
		if err := p.add(part{File: p.partName(0), InEnd: p.inEnd()}); err != nil {
			return err
		}
	}
	done, err := json.MarshalIndent(struct {
		Rows  int64 `json:"rows"`
		Parts int   `json:"parts"`
	}{p.rows(), len(p.m.Parts)}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(p.dir, successName), append(done, '\n')); err != nil {
		return fmt.Errorf("job: %s: %w", successName, err)
	}
	return nil
}

// add records a committed part.
func (p *parts) add(pt part) error {
	p.m.Parts = append(p.m.Parts, pt)
	return p.save()
}

// merge writes every part, in order, to output in row groups of a fixed
// size, then removes the parts folder. The output has the parts' schema, or
// empty's when there are no parts.
func (p *parts) merge(output string, empty func() (*arrow.Schema, error), overwrite bool, mem memory.Allocator) error {
	ds, err := p.dataset(empty, mem)
	if err != nil {
		return err
	}
	w, err := sink.Create(output, ds.Schema(), sink.WithOverwrite(overwrite), sink.WithAllocator(mem))
	if err != nil {
		return err
	}
	if _, err := dataset.Copy(&injecting{w, p.inject, "merge", 0}, ds.Batches(mem, rowGroupRows)); err != nil {
		w.Abort()
		return fmt.Errorf("job: merge parts: %w", err)
	}
	if err := w.Commit(); err != nil {
		return err
	}
	return os.RemoveAll(p.dir)
}

// mergeAside writes every part's set-aside rows, in order, to path
// (replacing an earlier attempt's), or an empty file of schema.
func (p *parts) mergeAside(path string, schema *arrow.Schema, mem memory.Allocator) error {
	var files []string
	for _, pt := range p.m.Parts {
		if pt.Aside != "" {
			files = append(files, filepath.Join(p.dir, pt.Aside))
		}
	}
	ds := dataset.FromRecords(schema)
	if len(files) > 0 {
		var err error
		if ds, err = dataset.Files(files, dataset.WithFormat(format.IPCFile), dataset.WithAllocator(mem)); err != nil {
			return err
		}
	}
	w, err := sink.Create(path, ds.Schema(), sink.WithOverwrite(true), sink.WithAllocator(mem))
	if err != nil {
		return err
	}
	if _, err := dataset.Copy(w, ds.Batches(mem, rowGroupRows)); err != nil {
		w.Abort()
		return fmt.Errorf("job: merge the rows set aside: %w", err)
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
			files = append(files, filepath.Join(p.dir, pt.File))
		}
	}
	if len(files) == 0 {
		schema, err := empty()
		if err != nil {
			return nil, err
		}
		return dataset.FromRecords(schema), nil
	}
	return dataset.Files(files, dataset.WithFormat(format.IPCFile), dataset.WithAllocator(mem))
}

// rowGroupRows is the row-group size of the merged output.
const rowGroupRows = 1 << 16

// partWriter cuts the prediction stream into parts of PartRows rows,
// written in records of chunk rows counted from the part's start, so a
// part's bytes do not depend on how the rows arrived. It drops rowColumn,
// after noting the input rows each part covers.
type partWriter struct {
	inject func(phase string, n int) error // tests' failures
	parts  *parts
	mem    memory.Allocator
	chunk  int
	aside  *aside // SetAside mode, else nil
	schema *arrow.Schema
	cur    *sink.Writer
	rows   int64 // rows in cur

	pending     []arrow.RecordBatch // less than a chunk, waiting
	pendingRows int
	lastRow     int64 // input row of the last row written
}

func (w *partWriter) write(rec arrow.RecordBatch) error {
	idx := rec.Schema().FieldIndices(rowColumn)[0]
	if w.schema == nil {
		fields := slices.Delete(slices.Clone(rec.Schema().Fields()), idx, idx+1)
		w.schema = arrow.NewSchema(fields, nil)
	}
	for off := int64(0); off < rec.NumRows(); {
		take := min(int64(w.chunk-w.pendingRows), rec.NumRows()-off)
		w.pending = append(w.pending, rec.NewSlice(off, off+take))
		w.pendingRows += int(take)
		off += take
		if w.pendingRows == w.chunk {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the pending rows as one record to the current part (made
// if need be), and commits it when full.
func (w *partWriter) flush() error {
	pending := w.pending
	w.pending, w.pendingRows = nil, 0
	defer func() {
		for _, r := range pending {
			r.Release()
		}
	}()
	if len(pending) == 0 {
		return nil
	}
	var rec arrow.RecordBatch
	for joined, err := range dataset.FromRecords(pending[0].Schema(), pending...).Batches(w.mem, w.chunk) {
		if err != nil {
			return err
		}
		joined.Retain()
		rec = joined
	}
	defer rec.Release()
	idx := rec.Schema().FieldIndices(rowColumn)[0]
	rows := rec.Column(idx).(*array.Int64)
	w.lastRow = rows.Value(rows.Len() - 1)
	cols := slices.Delete(slices.Clone(rec.Columns()), idx, idx+1)
	out := array.NewRecordBatch(w.schema, cols, rec.NumRows())
	defer out.Release()
	if w.cur == nil {
		name := w.parts.partName(len(w.parts.m.Parts))
		cur, err := sink.Create(filepath.Join(w.parts.dir, name), w.schema, sink.WithAllocator(w.mem), sink.WithOverwrite(true))
		if err != nil {
			return err
		}
		w.cur, w.rows = cur, 0
	}
	if err := w.cur.Write(out); err != nil {
		return err
	}
	w.rows += out.NumRows()
	if w.rows == int64(w.parts.m.PartRows) {
		return w.commit(w.lastRow + 1)
	}
	return nil
}

// commit makes the current part (if any) and its set-aside rows durable,
// and lists them in the manifest: the part covers input rows up to inEnd.
func (w *partWriter) commit(inEnd int64) error {
	i := len(w.parts.m.Parts)
	pt := part{InEnd: inEnd}
	if w.aside != nil {
		if rows := w.aside.take(inEnd); len(rows) > 0 {
			pt.Aside, pt.AsideRows = asideName(i), int64(len(rows))
			if err := w.aside.writePart(w.parts.dir, pt.Aside, rows); err != nil {
				if w.cur != nil {
					w.cur.Abort()
					w.cur = nil
				}
				return err
			}
		}
	}
	if cur := w.cur; cur != nil {
		w.cur = nil
		if w.inject != nil {
			if err := w.inject("part", i); err != nil {
				cur.Abort()
				return err
			}
		}
		if err := cur.Commit(); err != nil {
			return err
		}
		pt.File, pt.Rows = filepath.Base(cur.Path()), w.rows
	}
	if pt.File == "" && pt.Aside == "" {
		return nil
	}
	return w.parts.add(pt)
}

// finish writes what is pending and commits the last, short part, which
// covers every row read (inEnd).
func (w *partWriter) finish(inEnd int64) error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.commit(inEnd)
}

// abort discards the part being written and what is pending.
func (w *partWriter) abort() {
	for _, r := range w.pending {
		r.Release()
	}
	w.pending, w.pendingRows = nil, 0
	if w.cur != nil {
		w.cur.Abort()
		w.cur = nil
	}
}
