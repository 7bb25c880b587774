package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset"
)

var (
	// ErrExists reports a destination that exists already.
	ErrExists = errors.New("sink: output exists")
	// ErrFormat reports an output name of an unknown format.
	ErrFormat = errors.New("sink: unknown output format")
	// ErrClosed reports a write to a committed or aborted Writer.
	ErrClosed = errors.New("sink: writer closed")
)

// Format is an output file format.
type Format int

const (
	Parquet Format = iota + 1
	IPCFile
	IPCStream
)

// FormatOf returns the format of an output name by its extension, as
// dataset.FormatOf reads it: .parquet/.pq, .arrow/.ipc/.feather (IPC file),
// .arrows (IPC stream). CSV is not written.
func FormatOf(path string) (Format, error) {
	f, err := dataset.FormatOf(path)
	switch {
	case err != nil:
	case f == dataset.Parquet:
		return Parquet, nil
	case f == dataset.IPCFile:
		return IPCFile, nil
	case f == dataset.IPCStream:
		return IPCStream, nil
	}
	return 0, fmt.Errorf("%w: %s: extension %q (want .parquet, .arrow or .arrows)", ErrFormat, path, filepath.Ext(path))
}

type config struct {
	overwrite bool
	mem       memory.Allocator
	format    Format
}

// Option configures a Writer.
type Option func(*config)

// WithOverwrite lets Commit replace an existing destination.
func WithOverwrite(ok bool) Option { return func(c *config) { c.overwrite = ok } }

// WithAllocator sets the allocator the encoders use.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// WithFormat sets the format instead of taking it from the name.
func WithFormat(f Format) Option { return func(c *config) { c.format = f } }

// Writer writes records of one schema to a file that appears at Commit.
type Writer struct {
	path   string
	tmp    *os.File
	schema *arrow.Schema // the schema records arrive in
	stored *arrow.Schema // the schema written (Parquet: nullable tensors)
	enc    interface {
		Write(arrow.Record) error
		Close() error
	}
	overwrite bool
	parquet   bool
	groupRows int64 // Parquet: rows per row group
	done      bool
}

// Create starts writing records of schema to path.
func Create(path string, schema *arrow.Schema, opts ...Option) (*Writer, error) {
	c := config{mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(&c)
	}
	if c.format == 0 {
		f, err := FormatOf(path)
		if err != nil {
			return nil, err
		}
		c.format = f
	}
	if !c.overwrite {
		if _, err := os.Stat(path); err == nil {
			return nil, fmt.Errorf("%w: %s", ErrExists, path)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	w := &Writer{path: path, tmp: tmp, schema: schema, stored: schema, overwrite: c.overwrite}
	switch c.format {
	case Parquet:
		w.parquet = true
		w.stored = nullableTensors(schema)
		// Dictionaries do not pay off on float features and predictions;
		// hashing every value made writes 40% slower.
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
			parquet.WithAllocator(c.mem), parquet.WithDictionaryDefault(false))
		w.groupRows = rowGroupRows(schema)
		w.enc, err = pqarrow.NewFileWriter(w.stored, keepOpen{tmp}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(c.mem)))
	case IPCFile:
		w.enc, err = ipc.NewFileWriter(keepOpen{tmp}, ipc.WithSchema(schema), ipc.WithAllocator(c.mem))
	case IPCStream:
		w.enc = ipc.NewWriter(keepOpen{tmp}, ipc.WithSchema(schema), ipc.WithAllocator(c.mem))
	default:
		err = fmt.Errorf("%w: %d", ErrFormat, c.format)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("sink: %s: %w", path, err)
	}
	return w, nil
}

// keepOpen hides the file's Close from encoders that close their writer,
// so Commit can sync the file before closing it.
type keepOpen struct{ f *os.File }

func (k keepOpen) Write(p []byte) (int, error)               { return k.f.Write(p) }
func (k keepOpen) Seek(off int64, whence int) (int64, error) { return k.f.Seek(off, whence) }

// nullableTensors marks every fixed_size_list field nullable (see the
// package doc).
func nullableTensors(s *arrow.Schema) *arrow.Schema {
	fields := s.Fields()
	changed := false
	for i, f := range fields {
		if f.Type.ID() == arrow.FIXED_SIZE_LIST && !f.Nullable {
			fields[i].Nullable = true
			changed = true
		}
	}
	if !changed {
		return s
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

// Path returns the destination.
func (w *Writer) Path() string { return w.path }

// Write appends rec. Its schema must be the Writer's.
func (w *Writer) Write(rec arrow.Record) error {
	if w.done {
		return ErrClosed
	}
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("sink: %s: record schema %s, want %s", w.path, rec.Schema(), w.schema)
	}
	if w.stored != w.schema {
		rec = array.NewRecord(w.stored, rec.Columns(), rec.NumRows())
		defer rec.Release()
	}
	if !w.parquet || rec.NumRows() <= w.groupRows {
		if err := w.enc.Write(rec); err != nil {
			return fmt.Errorf("sink: %s: %w", w.path, err)
		}
		return nil
	}
	for off := int64(0); off < rec.NumRows(); off += w.groupRows {
		slice := rec.NewSlice(off, min(off+w.groupRows, rec.NumRows()))
		err := w.enc.Write(slice)
		slice.Release()
		if err != nil {
			return fmt.Errorf("sink: %s: %w", w.path, err)
		}
	}
	return nil
}

// parquetGroupValues is about the most leaf values a Parquet row group
// gets: a record is written as row groups of at most that many values.
// Arrow v15's level encoder grows its buffer by a fixed step, so writing a
// list column costs time quadratic in the row-group size: 64-float tensors
// write 5× faster in row groups of 256 rows than of 4096.
const parquetGroupValues = 16384

// rowGroupRows returns the rows per row group for schema s.
func rowGroupRows(s *arrow.Schema) int64 {
	values := 0
	for _, f := range s.Fields() {
		values += leafValues(f.Type)
	}
	return int64(min(max(parquetGroupValues/max(values, 1), 128), 1<<16))
}

// leafValues returns the values one row of type dt holds (lists count 1).
func leafValues(dt arrow.DataType) int {
	switch t := dt.(type) {
	case *arrow.FixedSizeListType:
		return int(t.Len()) * leafValues(t.Elem())
	case *arrow.StructType:
		n := 0
		for _, f := range t.Fields() {
			n += leafValues(f.Type)
		}
		return n
	}
	return 1
}

// Commit finishes the file, syncs it and renames it to its destination.
func (w *Writer) Commit() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	err := w.enc.Close()
	if err == nil {
		err = w.tmp.Sync()
	}
	if cerr := w.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && !w.overwrite {
		if _, serr := os.Stat(w.path); serr == nil {
			err = fmt.Errorf("%w: %s", ErrExists, w.path)
		}
	}
	if err == nil {
		err = os.Rename(w.tmp.Name(), w.path)
	}
	if err != nil {
		os.Remove(w.tmp.Name())
		return fmt.Errorf("sink: commit %s: %w", w.path, err)
	}
	return SyncDir(filepath.Dir(w.path))
}

// Abort discards what was written. It is safe after Commit (a no-op).
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.enc.Close()
	w.tmp.Close()
	os.Remove(w.tmp.Name())
}

// SyncDir syncs a directory, so a rename in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sink: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sink: sync %s: %w", dir, err)
	}
	return nil
}
