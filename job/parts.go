package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
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
	File string `json:"file"` // name inside the parts folder
	Rows int64  `json:"rows"`
}

const manifestName = "manifest.json"

// parts is the folder of durable parts of one job.
type parts struct {
	dir string
	m   manifest
}

// openParts prepares the parts folder: a fresh one, the interrupted run's
// (resume), or a fresh one in place of it (overwrite).
func openParts(dir, fingerprint string, partRows int, resume, overwrite bool) (*parts, error) {
	p := &parts{dir: dir, m: manifest{Version: 1, Fingerprint: fingerprint, PartRows: partRows}}
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	switch {
	case err == nil && resume:
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("job: %s: %w", filepath.Join(dir, manifestName), err)
		}
		if m.Fingerprint != fingerprint || m.PartRows != partRows {
			return nil, fmt.Errorf("%w (%s)", ErrChanged, dir)
		}
		p.m = m
	case err == nil && overwrite:
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
	case err == nil:
		return nil, fmt.Errorf("%w: %s", ErrInterrupted, dir)
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("job: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("job: output folder: %w", err)
	}
	// A part whose writing was interrupted never reached the manifest.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	for _, e := range entries {
		if !p.listed(e.Name()) && e.Name() != manifestName {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return p, p.save() // also proves the folder is writable
}

// finished reports whether dir holds the parts of this job whose output
// was written, and if so removes them and returns the rows they held.
func finished(dir, fingerprint string) (int64, bool) {
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return 0, false
	}
	p := &parts{dir: dir}
	if json.Unmarshal(data, &p.m) != nil || p.m.Fingerprint != fingerprint {
		return 0, false
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, false
	}
	return p.rows(), true
}

func (p *parts) listed(name string) bool {
	for _, pt := range p.m.Parts {
		if pt.File == name {
			return true
		}
	}
	return false
}

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
	tmp, err := os.CreateTemp(p.dir, "."+manifestName+".tmp-*")
	if err != nil {
		return fmt.Errorf("job: manifest: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(p.dir, manifestName))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("job: manifest: %w", err)
	}
	return sink.SyncDir(p.dir)
}

// add records a committed part.
func (p *parts) add(name string, rows int64) error {
	p.m.Parts = append(p.m.Parts, part{File: name, Rows: rows})
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
	if len(p.m.Parts) > 0 {
		for rec, err := range ds.Batches(mem, rowGroupRows) {
			if err == nil {
				err = w.Write(rec)
			}
			if err != nil {
				w.Abort()
				return fmt.Errorf("job: merge parts: %w", err)
			}
		}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	return os.RemoveAll(p.dir)
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
	files := make([]string, len(p.m.Parts))
	for i, pt := range p.m.Parts {
		files[i] = filepath.Join(p.dir, pt.File)
	}
	return dataset.Files(files, dataset.WithFormat(dataset.IPCFile), dataset.WithAllocator(mem))
}

// rowGroupRows is the row-group size of the merged output.
const rowGroupRows = 1 << 16

// partWriter cuts the prediction stream into parts of PartRows rows.
type partWriter struct {
	parts  *parts
	mem    memory.Allocator
	schema *arrow.Schema
	cur    *sink.Writer
	rows   int64 // rows in cur
}

func (w *partWriter) write(rec arrow.RecordBatch) error {
	if w.schema == nil {
		w.schema = rec.Schema()
	}
	limit := int64(w.parts.m.PartRows)
	for off := int64(0); off < rec.NumRows(); {
		if w.cur == nil {
			name := fmt.Sprintf("part-%06d.arrow", len(w.parts.m.Parts))
			cur, err := sink.Create(filepath.Join(w.parts.dir, name), w.schema, sink.WithAllocator(w.mem), sink.WithOverwrite(true))
			if err != nil {
				return err
			}
			w.cur, w.rows = cur, 0
		}
		take := min(limit-w.rows, rec.NumRows()-off)
		slice := rec.NewSlice(off, off+take)
		err := w.cur.Write(slice)
		slice.Release()
		if err != nil {
			return err
		}
		w.rows += take
		off += take
		if w.rows == limit {
			if err := w.commit(); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit makes the current part durable and lists it in the manifest.
func (w *partWriter) commit() error {
	cur := w.cur
	w.cur = nil
	if err := cur.Commit(); err != nil {
		return err
	}
	return w.parts.add(filepath.Base(cur.Path()), w.rows)
}

// finish commits the last, short part.
func (w *partWriter) finish() error {
	if w.cur == nil {
		return nil
	}
	return w.commit()
}

// abort discards the part being written.
func (w *partWriter) abort() {
	if w.cur != nil {
		w.cur.Abort()
		w.cur = nil
	}
}
