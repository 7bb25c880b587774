package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

var (
	// ErrExists reports a destination that exists already.
	ErrExists = errors.New("sink: output exists")
	// ErrFormat reports an output name of an unknown format.
	ErrFormat = errors.New("sink: unknown output format")
	// ErrClosed reports a write to a committed or aborted Writer.
	ErrClosed = errors.New("sink: writer closed")
)

// Writable reports the format of an output name by its extension, and
// whether the sink writes it: .parquet/.pq, .arrow/.ipc/.feather (IPC
// file), .arrows (IPC stream); not CSV.
func Writable(path string) (format.Format, error) {
	f, err := format.Of(path)
	if err == nil && f == format.CSV {
		err = fmt.Errorf("%s: CSV", path)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %w (want .parquet, .arrow or .arrows)", ErrFormat, err)
	}
	return f, nil
}

type config struct {
	overwrite bool
	mem       memory.Allocator
	format    format.Format
	groupRows int64
	opener    *storage.Opener
	ctx       context.Context
}

// Option configures a Writer.
type Option func(*config)

// WithOverwrite lets Commit replace an existing destination.
func WithOverwrite(ok bool) Option { return func(c *config) { c.overwrite = ok } }

// WithAllocator sets the allocator the encoders use.
func WithAllocator(mem memory.Allocator) Option { return func(c *config) { c.mem = mem } }

// WithFormat sets the format instead of taking it from the name.
func WithFormat(f format.Format) Option { return func(c *config) { c.format = f } }

// WithRowGroupRows sets the rows of each Parquet row group (the last may
// hold fewer). By default a group holds about 1<<20 leaf values: 16,384
// rows of 64-float tensors. Values below 1 keep the default.
func WithRowGroupRows(n int64) Option { return func(c *config) { c.groupRows = n } }

// WithOpener sets the Opener an object URL is written through (which keeps
// its buckets open across writers); by default a Writer of a URL opens and
// closes its own.
func WithOpener(o *storage.Opener) Option { return func(c *config) { c.opener = o } }

// WithContext makes ctx the context of an object's upload: once it is
// cancelled, the upload ends and creates nothing (Commit fails). The
// default is context.Background().
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }

// Writer writes records of one schema to a file, or an object, that
// appears whole at Commit.
type Writer struct {
	path   string
	out    *storage.Writer
	own    *storage.Opener // opened for this Writer, closed with it
	schema *arrow.Schema
	enc    interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	write     func(arrow.RecordBatch) error // enc's Write, or Parquet's writeParquet
	overwrite bool
	done      bool

	// Parquet: the records of the row group being gathered, their rows,
	// and the rows a group holds; an empty record, if one came first;
	// whether a group was written.
	pq                  *pqarrow.FileWriter
	group               []arrow.RecordBatch
	inGroup, groupLimit int64
	empty               arrow.RecordBatch
	wroteGroup          bool
	mem                 memory.Allocator
}

// Create starts writing records of schema to path, a local path or an
// object's URL (s3://bucket/key, gs://, azblob://).
func Create(path string, schema *arrow.Schema, opts ...Option) (*Writer, error) {
	c := config{mem: memory.DefaultAllocator, ctx: context.Background()}
	for _, o := range opts {
		o(&c)
	}
	if c.format == format.Auto {
		f, err := Writable(path)
		if err != nil {
			return nil, err
		}
		c.format = f
	}
	w := &Writer{path: path, schema: schema, overwrite: c.overwrite}
	if c.opener == nil {
		w.own = storage.NewOpener()
		c.opener = w.own
	}
	ctx := c.ctx
	if !c.overwrite {
		if _, err := c.opener.Stat(ctx, path); err == nil {
			w.closeOpener()
			return nil, fmt.Errorf("%w: %s", ErrExists, path)
		}
	}
	out, err := c.opener.Create(ctx, path, c.overwrite)
	if err != nil {
		w.closeOpener()
		return nil, fmt.Errorf("sink: %w", err)
	}
	w.out = out
	switch c.format {
	case format.Parquet:
		// Dictionaries do not pay off on float features and predictions;
		// hashing every value made writes 40% slower.
		w.groupLimit, w.mem = cmp.Or(max(c.groupRows, 0), rowGroupRows(schema)), c.mem
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
			parquet.WithAllocator(c.mem), parquet.WithDictionaryDefault(false),
			parquet.WithMaxRowGroupLength(w.groupLimit))
		w.pq, err = pqarrow.NewFileWriter(schema, keepOpen{out}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(c.mem)))
		if err == nil {
			w.enc, w.write = w.pq, w.writeParquet
		}
	case format.IPCFile:
		w.enc, err = ipc.NewFileWriter(keepOpen{out}, ipc.WithSchema(schema), ipc.WithAllocator(c.mem))
	case format.IPCStream:
		w.enc = ipc.NewWriter(keepOpen{out}, ipc.WithSchema(schema), ipc.WithAllocator(c.mem))
	default:
		err = fmt.Errorf("%w: %s", ErrFormat, c.format)
	}
	if err != nil {
		out.Abort()
		w.closeOpener()
		return nil, fmt.Errorf("sink: %s: %w", path, err)
	}
	if w.write == nil {
		w.write = w.enc.Write
	}
	return w, nil
}

// keepOpen hides the output's Close from encoders that close their
// writer: Commit or Abort decides what becomes of it.
type keepOpen struct{ w io.Writer }

func (k keepOpen) Write(p []byte) (int, error) { return k.w.Write(p) }

func (w *Writer) closeOpener() {
	if w.own != nil {
		w.own.Close()
	}
}

// Size returns the bytes written: the file's size once committed.
func (w *Writer) Size() int64 { return w.out.Size() }

// Schema returns the schema of the records the Writer takes.
func (w *Writer) Schema() *arrow.Schema { return w.schema }

// Path returns the destination.
func (w *Writer) Path() string { return w.path }

// Write appends rec. Its schema must be the Writer's.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.done {
		return ErrClosed
	}
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("sink: %s: record schema %s, want %s", w.path, rec.Schema(), w.schema)
	}
	if err := w.write(rec); err != nil {
		return fmt.Errorf("sink: %s: %w", w.path, err)
	}
	return nil
}

// writeParquet writes rec into row groups of groupLimit rows, so the
// groups depend on the rows alone, not on how they arrive in records. It
// gathers a group's records (shared, not copied) and writes the group
// whole, column after column, straight to the output: arrow-go's
// buffered row groups instead encode every page into a growing buffer and
// copy it out at the group's end, a quarter of a write's time. It cuts
// rec at the groups' boundaries itself, and hands the encoder no
// fixed_size_list at an offset: arrow-go's Parquet writer (v18.8.0) writes
// such a slice's values from its parent's first row, so every row group
// after the first would repeat the first's tensors.
func (w *Writer) writeParquet(rec arrow.RecordBatch) error {
	n := rec.NumRows()
	if n == 0 {
		if w.empty == nil && !w.wroteGroup && len(w.group) == 0 {
			// Written at the commit if no row comes: the file then has an
			// empty row group.
			rec.Retain()
			w.empty = rec
		}
		return nil
	}
	for off := int64(0); off < n; {
		k := min(n-off, w.groupLimit-w.inGroup)
		part := rec
		if off > 0 || k < n {
			part = rec.NewSlice(off, off+k)
		} else {
			part.Retain()
		}
		part, err := atZeroOffset(w.mem, part)
		if err != nil {
			return err
		}
		w.group = append(w.group, part)
		w.inGroup += k
		off += k
		if w.inGroup == w.groupLimit {
			if err := w.flushGroup(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushGroup writes the gathered rows as a row group.
func (w *Writer) flushGroup() error {
	group, rows := w.group, w.inGroup
	w.group, w.inGroup = nil, 0
	defer releaseAll(group)
	if len(group) == 0 {
		return nil
	}
	if err := w.pq.NewRowGroupChecked(); err != nil {
		return err
	}
	w.wroteGroup = true
	cols := make([]arrow.Array, len(group))
	for i, f := range w.schema.Fields() {
		for j, r := range group {
			cols[j] = r.Column(i)
		}
		chunked := arrow.NewChunked(f.Type, cols)
		err := w.pq.WriteColumnChunked(chunked, 0, rows)
		chunked.Release()
		if err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return nil
}

// finishParquet writes the last, short row group, or the empty one of a
// file that got an empty record and no row.
func (w *Writer) finishParquet() error {
	if w.pq == nil {
		return nil
	}
	if err := w.flushGroup(); err != nil {
		return err
	}
	if w.empty != nil && !w.wroteGroup {
		return w.pq.WriteBuffered(w.empty)
	}
	return nil
}

// releaseParquet releases the records a Parquet writer holds.
func (w *Writer) releaseParquet() {
	releaseAll(w.group)
	w.group, w.inGroup = nil, 0
	if w.empty != nil {
		w.empty.Release()
		w.empty = nil
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// atZeroOffset returns rec, which it takes, with every column that holds
// a fixed_size_list at an offset copied to one at offset 0.
func atZeroOffset(mem memory.Allocator, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if !slices.ContainsFunc(rec.Columns(), fixedListAtOffset) {
		return rec, nil
	}
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range rec.Columns() {
		if !fixedListAtOffset(c) {
			c.Retain()
			cols[i] = c
			continue
		}
		copied, err := array.Concatenate([]arrow.Array{c}, mem)
		if err != nil {
			return nil, fmt.Errorf("sink: column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = copied
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}

// fixedListAtOffset reports whether arr is, or holds, a fixed_size_list
// whose data starts at an offset.
func fixedListAtOffset(arr arrow.Array) bool {
	return dataFixedListAtOffset(arr.Data(), false)
}

func dataFixedListAtOffset(d arrow.ArrayData, parentOffset bool) bool {
	at := parentOffset || d.Offset() != 0
	if _, ok := d.DataType().(*arrow.FixedSizeListType); ok && at {
		return true
	}
	for _, child := range d.Children() {
		if dataFixedListAtOffset(child, at) {
			return true
		}
	}
	return false
}

// parquetGroupValues is about the most leaf values a Parquet row group
// holds: 16,384 rows of 64-float tensors, about 4 MiB before compression,
// gathered in memory (as Arrow records) until the group is full. (Arrow
// v15's level encoder was quadratic in the group size and forced groups
// of 256 such rows; v18's is linear.)
const parquetGroupValues = 1 << 20

// rowGroupRows returns the rows per row group for schema s.
func rowGroupRows(s *arrow.Schema) int64 {
	values := 0
	for _, f := range s.Fields() {
		values += leafValues(f.Type)
	}
	return int64(min(max(parquetGroupValues/max(values, 1), 1024), 1<<20))
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
	defer w.closeOpener()
	defer w.releaseParquet()
	if err := w.finishParquet(); err != nil {
		w.enc.Close()
		w.out.Abort()
		return fmt.Errorf("sink: commit %s: %w", w.path, err)
	}
	if err := w.enc.Close(); err != nil {
		w.out.Abort()
		return fmt.Errorf("sink: commit %s: %w", w.path, err)
	}
	if err := w.out.Commit(); err != nil {
		if errors.Is(err, storage.ErrExists) {
			return fmt.Errorf("%w: %s", ErrExists, w.path)
		}
		return fmt.Errorf("sink: commit %s: %w", w.path, err)
	}
	return nil
}

// Abort discards what was written. It is safe after Commit (a no-op).
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.releaseParquet()
	w.enc.Close()
	w.out.Abort()
	w.closeOpener()
}
