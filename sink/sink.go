package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
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
	overwrite  bool
	mem        memory.Allocator
	format     format.Format
	groupRows  int64
	groupBytes int64
	encoders   int
	opener     *storage.Opener
	ctx        context.Context
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
// hold fewer; any may, to stay within WithRowGroupBytes). By default a
// group holds about 1<<20 leaf values: 16,384 rows of 64-float tensors.
// Values below 1 keep the default.
func WithRowGroupRows(n int64) Option { return func(c *config) { c.groupRows = n } }

// WithRowGroupBytes ends a Parquet row group before its rows' Arrow
// buffers (values and offsets) pass n bytes, if it is not full of rows
// first (WithRowGroupRows): at least one row a group. The group's encoded
// pages, held until they are copied into the file, take about as many
// bytes again at most. Values below 1 keep DefaultRowGroupBytes.
func WithRowGroupBytes(n int64) Option { return func(c *config) { c.groupBytes = n } }

// WithEncoders lets a Parquet writer encode up to n row groups at once,
// each on a goroutine of its own, while the caller gathers the next: for
// a caller that must not stop for a group's encoding (one encoder), or a
// writer with cores to spare (more). It then holds the records of up to
// n+1 row groups (WithRowGroupBytes each) and the encoded bytes of n. The
// file is the same whatever n. By default (0) a row group is encoded on
// the caller's goroutine as it fills.
func WithEncoders(n int) Option { return func(c *config) { c.encoders = n } }

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
	pq                    *pqarrow.FileWriter
	spliced               *splicer // encodes and places the row groups
	group                 []arrow.RecordBatch
	inGroup, groupLimit   int64
	groupBits, groupBytes int64 // the group's bits so far (rowBits), and its ceiling in bytes
	empty                 arrow.RecordBatch
	wroteGroup            bool
	mem                   memory.Allocator
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
		// hashing every value made writes 40% slower. Pages of 64 KiB
		// (arrow-go's default is 1 MiB) keep a page's buffers and its
		// Snappy block in cache: a fifth less CPU a row of predictions.
		w.groupLimit, w.mem = cmp.Or(max(c.groupRows, 0), rowGroupRows(schema)), c.mem
		w.groupBytes = cmp.Or(max(c.groupBytes, 0), DefaultRowGroupBytes)
		arrowProps := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(c.mem))
		var props *parquet.WriterProperties
		if props, err = parquetProps(schema, arrowProps, parquet.WithCompression(compress.Codecs.Snappy),
			parquet.WithAllocator(c.mem), parquet.WithDictionaryDefault(false),
			parquet.WithMaxRowGroupLength(w.groupLimit), parquet.WithDataPageSize(dataPageBytes)); err == nil {
			// The file's footer comes from a file that gets no row group.
			w.pq, err = pqarrow.NewFileWriter(schema, io.Discard, props, arrowProps)
		}
		var enc *groupEncoder
		if err == nil {
			enc, err = newGroupEncoder(schema, props, arrowProps, c.mem)
		}
		w.spliced = newSplicer(enc, c.encoders)
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

// dataPageBytes is the size a Parquet data page is cut at, before
// compression.
const dataPageBytes = 64 << 10

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

// SetFooter adds a key and value to a Parquet file's footer metadata,
// written at Commit: what is known only once every row is written (the
// rows a job set aside). Other formats have no footer: an error.
func (w *Writer) SetFooter(key, value string) error {
	if w.pq == nil {
		return fmt.Errorf("sink: %s: footer metadata needs a Parquet file", w.path)
	}
	return w.pq.AppendKeyValueMetadata(key, value)
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
