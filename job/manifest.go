package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// A job's manifest: what it holds, and its writes, the fencing token of
// an output on object storage.

// manifest lists the completed parts of a job.
type manifest struct {
	Version     int    `json:"version"`
	Fingerprint string `json:"fingerprint"`
	PartRows    int    `json:"part_rows"`
	Parts       []part `json:"parts"`
	// Writes counts the manifest's writes: each write's bytes differ
	// from the one before, and so does its version (an ETag is the
	// hash of the bytes), so that a write conditional on the version a
	// run last wrote fails once another run has written one. A folder
	// output's final manifest has none: its bytes do not depend on the
	// runs that made it.
	Writes int `json:"writes,omitempty"`
}

type part struct {
	// File (name inside the parts folder; none if no row was predicted)
	// and its Rows, as every output folder's manifest lists them.
	storage.ManifestPart
	// Size is File's size in bytes, checked against a listing on resume.
	Size int64 `json:"size,omitempty"`
	// InEnd is the end of the input rows (counted over every row read) the
	// part covers: a resume reads on from there.
	InEnd int64 `json:"in_end"`
	// Aside names the part's rows set aside, if any (SetAside mode).
	Aside     string `json:"aside,omitempty"`
	AsideRows int64  `json:"aside_rows,omitempty"`
	AsideSize int64  `json:"aside_size,omitempty"`
}

// readManifest returns the manifest's bytes and, for an object, the
// version they are.
func (l layout) readManifest() ([]byte, storage.Version, error) {
	if storage.IsURL(l.dir) {
		return l.store.ReadVersion(l.ctx, l.manifest())
	}
	data, err := l.store.ReadFile(l.ctx, l.manifest())
	return data, storage.Version{}, err
}

// save writes the manifest, one write more.
func (p *parts) save() error {
	p.m.Writes++
	return p.put()
}

// put replaces the manifest atomically and durably. On object storage
// the write is conditional on the version this run last read or wrote
// (none: the manifest must not exist), so the manifest is the fencing
// token: a run that another took the output from (--break-lock) fails
// here with ErrLockLost, even if it passed the lock's check an instant
// before. The manifest is read back after, for stores that ignore the
// condition; on those, a take-over between the check and the write
// cannot be seen. A local output's lock is the system's, held by one
// process.
func (p *parts) put() error {
	data, err := json.MarshalIndent(p.m, "", "  ")
	if err != nil {
		return err
	}
	p.saves++
	if p.inject != nil {
		err = p.inject("manifest", p.saves-1)
	}
	if err == nil {
		err = p.fenced()
	}
	if err == nil {
		err = p.write(data)
	}
	if err != nil {
		return fmt.Errorf("job: manifest: %w", err)
	}
	return nil
}

func (p *parts) write(data []byte) error {
	name := p.manifest()
	if !storage.IsURL(p.dir) {
		return p.store.WriteFile(p.ctx, name, data, true)
	}
	var err error
	if p.version == (storage.Version{}) {
		err = p.store.WriteFile(p.ctx, name, data, false)
	} else {
		err = p.store.ReplaceFile(p.ctx, name, data, p.version)
	}
	if errors.Is(err, storage.ErrExists) || errors.Is(err, storage.ErrChanged) {
		return fmt.Errorf("%w: %s was written by another run since this one's last write", ErrLockLost, name)
	}
	if err != nil {
		return err
	}
	got, v, err := p.store.ReadVersion(p.ctx, name)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%w: %s holds another run's manifest", ErrLockLost, name)
	}
	p.version = v
	return nil
}

// seal finishes a folder output: an empty part if there is none (so the
// folder reads as a dataset of the output's schema), then _SUCCESS.
func (p *parts) seal(empty func() (*arrow.Schema, error), mem memory.Allocator) error {
	if err := p.fenced(); err != nil {
		return err
	}
	if !slices.ContainsFunc(p.m.Parts, func(pt part) bool { return pt.File != "" }) {
		// No part holds a row (none came, or every one was set aside).
		schema, err := empty()
		if err != nil {
			return err
		}
		name := p.partName(len(p.m.Parts))
		w, err := sink.Create(p.path(name), schema, sink.WithOverwrite(true), sink.WithAllocator(mem), sink.WithOpener(p.store), sink.WithRowGroupBytes(p.groupBytes))
		if err != nil {
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
		if err := p.add(part{ManifestPart: storage.ManifestPart{File: name}, Size: w.Size(), InEnd: p.inEnd()}); err != nil {
			return err
		}
	}
	// The final manifest, without its count of writes; then the marker,
	// which no other run may have written (If-None-Match).
	p.m.Writes = 0
	if err := p.put(); err != nil {
		return err
	}
	done := storage.Success{Rows: p.rows(), Parts: len(p.m.Parts)}.Marshal()
	if err := p.store.WriteFile(p.ctx, p.path(successName), done, false); err != nil {
		if errors.Is(err, storage.ErrExists) {
			err = fmt.Errorf("%w: another run wrote it", ErrLockLost)
		}
		return fmt.Errorf("job: %s: %w", successName, err)
	}
	return nil
}
