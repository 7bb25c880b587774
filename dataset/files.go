package dataset

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/format"
)

var (
	// ErrNoFiles reports a pattern that matches no file.
	ErrNoFiles = errors.New("dataset: no input files")
	// ErrFormat reports files of mixed formats, or a format the sources do
	// not read.
	ErrFormat = errors.New("dataset: mixed or unreadable file formats")
	// ErrShard reports a malformed shard spec or index.
	ErrShard = errors.New("dataset: bad shard")
	// ErrColumn reports a projected column that the files do not have.
	ErrColumn = errors.New("dataset: no such column")
)

// Shard selects part Index of Count of a dataset (TPUEstimator's per-host
// input): the Count shards are disjoint and together hold every row once.
type Shard struct{ Index, Count int }

// ParseShard parses "i/n" with 0 ≤ i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: %q, want i/n such as 0/4", ErrShard, s)
	}
	sh := Shard{Index: i, Count: n}
	return sh, sh.check()
}

func (s Shard) check() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("%w: %d/%d, want 0 ≤ i < n", ErrShard, s.Index, s.Count)
	}
	return nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// owns reports whether the shard reads unit u (a row group, a record batch,
// a chunk) of file f of files; u < 0 asks whether it reads any of file f.
// With at least as many files as shards, files are dealt whole; else each
// file's units are dealt round-robin, starting at a different shard per file.
func (s Shard) owns(files, f, u int) bool {
	n := s.Count
	switch {
	case n == 1:
		return true
	case files >= n:
		return f%n == s.Index
	}
	return u < 0 || (f+u)%n == s.Index
}

type filesConfig struct {
	format       format.Format
	columns      []string
	batchRows    int
	csvSchema    *arrow.Schema
	csvSample    int
	csvBadValues func(path string, fileRow int64, column string, err error)
	shard        Shard
	mem          memory.Allocator
	maxMemory    int64 // a read's memory ceiling; 0: derived from the file's size
	origins      *Origins
}

// FilesOption configures [Files].
type FilesOption func(*filesConfig)

// WithFormat sets the format instead of guessing it from file names.
func WithFormat(f format.Format) FilesOption { return func(c *filesConfig) { c.format = f } }

// WithColumns reads only the named columns, in that order.
func WithColumns(names ...string) FilesOption {
	return func(c *filesConfig) { c.columns = append([]string{}, names...) }
}

// WithReadRows sets how many rows a Parquet read or a CSV chunk holds (the
// default is 65536). It bounds the memory a read holds, not the batch size.
func WithReadRows(n int) FilesOption { return func(c *filesConfig) { c.batchRows = n } }

// WithCSVSchema gives the schema of CSV files; without it, it is inferred.
func WithCSVSchema(s *arrow.Schema) FilesOption { return func(c *filesConfig) { c.csvSchema = s } }

// WithCSVBadValues makes a CSV value that does not parse a null, reported
// to fn with its file, file row (from 0, after the header) and column,
// instead of an error that ends the read: for callers that set such rows
// aside. fn is called before the record holding the row is yielded.
func WithCSVBadValues(fn func(path string, fileRow int64, column string, err error)) FilesOption {
	return func(c *filesConfig) { c.csvBadValues = fn }
}

// WithCSVSample sets how many rows of each CSV file the column types are
// inferred from (the default is 10,000). A later value that does not parse
// as its column's type is an error naming the file, row and column.
func WithCSVSample(rows int) FilesOption { return func(c *filesConfig) { c.csvSample = rows } }

// WithShard reads only shard s: whole files when there are at least as many
// files as shards, else row groups (Parquet), record batches (IPC files) or
// chunks (CSV, IPC streams) dealt round-robin.
func WithShard(s Shard) FilesOption { return func(c *filesConfig) { c.shard = s } }

// WithAllocator sets the allocator of the records read.
func WithAllocator(mem memory.Allocator) FilesOption { return func(c *filesConfig) { c.mem = mem } }

// WithMaxMemory sets the most memory the reader of one file may hold at
// once, records it yielded and not yet released included. A damaged file
// whose length fields ask for more fails with [ErrUnreadable] instead of
// exhausting the machine. The default is 2 GiB plus 16 times the file's
// size.
func WithMaxMemory(bytes int64) FilesOption { return func(c *filesConfig) { c.maxMemory = bytes } }

func newFilesConfig(opts []FilesOption) (*filesConfig, error) {
	c := &filesConfig{batchRows: 1 << 16, shard: Shard{0, 1}, mem: memory.DefaultAllocator, csvSample: 10_000}
	for _, o := range opts {
		o(c)
	}
	if err := c.shard.check(); err != nil {
		return nil, err
	}
	if c.batchRows <= 0 {
		return nil, fmt.Errorf("dataset: read rows %d, want > 0", c.batchRows)
	}
	return c, nil
}

// Expand returns the files the patterns name, in a stable (sorted) order,
// each once. A pattern without glob characters must name an existing file;
// a glob must match at least one.
func Expand(patterns []string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		if !strings.ContainsAny(p, "*?[") {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("dataset: input %w", err)
			}
			out = append(out, p)
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("dataset: pattern %q: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%w: %q matches nothing", ErrNoFiles, p)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no pattern given", ErrNoFiles)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Files returns a dataset over the files the patterns name, read in sorted
// order as one stream. All files must have one format and one schema.
func Files(patterns []string, opts ...FilesOption) (*Dataset, error) {
	c, err := newFilesConfig(opts)
	if err != nil {
		return nil, err
	}
	paths, err := Expand(patterns)
	if err != nil {
		return nil, err
	}
	if c.format == format.Auto {
		// Every file's name must say the first one's format.
		for i, p := range paths {
			f, err := format.Of(p)
			if err != nil {
				return nil, fmt.Errorf("dataset: %w", err)
			}
			if i > 0 && f != c.format {
				return nil, fmt.Errorf("%w: %s is %s, %s is %s", ErrFormat, p, f, paths[0], c.format)
			}
			c.format = f
		}
	}

	// Every file's schema must match the first one's.
	var schema *arrow.Schema
	for _, p := range paths {
		r, err := c.open(p)
		if err != nil {
			return nil, err
		}
		s := r.schema()
		r.close()
		if schema == nil {
			schema = s
		} else if !s.Equal(schema) {
			return nil, fmt.Errorf("%w: %s: schema %s, %s has %s", ErrSchemaMismatch, p, s, paths[0], schema)
		}
	}
	return New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		c.origins.reset()
		for f, p := range paths {
			if !c.readFile(f, len(paths), p, yield) {
				return
			}
		}
	}), nil
}

// readFile yields this shard's records of one file; false means stop.
func (c *filesConfig) readFile(f, files int, path string, yield func(arrow.RecordBatch, error) bool) bool {
	if !c.shard.owns(files, f, -1) {
		return true
	}
	r, err := c.open(path)
	if err != nil {
		return yield(nil, err)
	}
	defer r.close()
	mine := func(unit int) bool { return c.shard.owns(files, f, unit) }
	inYield := false
	err = guard(&inYield, func() error {
		return r.read(mine, func(rec arrow.RecordBatch, runs []run) bool {
			c.origins.add(path, runs)
			inYield = true
			ok := yield(rec, nil)
			inYield = false
			return ok
		})
	})
	if errors.Is(err, errStop) {
		return false
	}
	if err != nil && !errors.Is(err, ErrUnreadable) && !errors.Is(err, ErrCSVValue) {
		err = fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if err != nil {
		return yield(nil, fmt.Errorf("dataset: %s: %w", path, err))
	}
	return true
}

// errStop reports that the consumer stopped.
var errStop = errors.New("stopped")

// fileReader reads one file. read yields the records of the units mine
// accepts (row groups, record batches, or records of unsplittable files),
// each with the runs of file rows it holds.
type fileReader interface {
	schema() *arrow.Schema
	read(mine func(unit int) bool, yield func(arrow.RecordBatch, []run) bool) error
	close()
}

// open opens a file's reader, with an allocator under the file's memory
// ceiling; a panic of the reader is an error.
func (c *filesConfig) open(path string) (fileReader, error) {
	var r fileReader
	err := guard(nil, func() error {
		mem, err := c.fileMemory(path)
		if err != nil {
			return err
		}
		switch c.format {
		case format.Parquet:
			r, err = c.openParquet(path, mem)
		case format.IPCFile, format.IPCStream:
			r, err = c.openIPC(path, mem)
		case format.CSV:
			r, err = c.openCSV(path, mem)
		default:
			err = fmt.Errorf("%w: %s", ErrFormat, c.format)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", path, err)
	}
	return r, nil
}

// fileMemory returns the allocator for reading path: the configured one,
// under the file's memory ceiling.
func (c *filesConfig) fileMemory(path string) (memory.Allocator, error) {
	limit := c.maxMemory
	if limit <= 0 {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		limit = defaultMemoryCeiling + 16*st.Size()
	}
	return &ceiling{mem: c.mem, limit: limit}, nil
}

// ---- Parquet ----

type parquetReader struct {
	c      *filesConfig
	mem    memory.Allocator
	pf     *file.Reader
	fr     *pqarrow.FileReader
	leaves []int
	out    *arrow.Schema
}

func (c *filesConfig) openParquet(path string, mem memory.Allocator) (fileReader, error) {
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return nil, err
	}
	if err := checkStoredSchema(pf); err != nil {
		pf.Close()
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(c.batchRows)}, mem)
	if err != nil {
		pf.Close()
		return nil, err
	}
	r := &parquetReader{c: c, mem: mem, pf: pf, fr: fr}
	full, err := fr.Schema()
	if err != nil {
		pf.Close()
		return nil, err
	}
	r.out = full
	if c.columns != nil {
		fields := make([]arrow.Field, len(c.columns))
		for i, name := range c.columns {
			idx := full.FieldIndices(name)
			if len(idx) != 1 {
				pf.Close()
				return nil, fmt.Errorf("%w: %q (the file has %s)", ErrColumn, name, fieldNames(full))
			}
			fields[i] = full.Field(idx[0])
			// Parquet reads by leaf column, not by Arrow field.
			r.leaves = appendLeaves(r.leaves, &fr.Manifest.Fields[idx[0]])
		}
		md := full.Metadata()
		r.out = arrow.NewSchema(fields, &md)
	}
	return r, nil
}

// checkStoredSchema reads the Arrow schema a Parquet writer stored in the
// footer with lengths bounded by its size. pqarrow reads it with the
// default allocator and no bounds, so a damaged length there would ask
// the Go runtime for gigabytes, a fatal error no recover catches.
func checkStoredSchema(pf *file.Reader) error {
	v := pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
	if v == nil {
		return nil
	}
	// Encoded as pqarrow decodes it: padded base64, else unpadded.
	var decoded []byte
	var err error
	if len(*v)%4 == 0 {
		decoded, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(decoded) == 0 || err != nil {
		decoded, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err != nil {
		return nil // pqarrow reports it
	}
	if err := checkSchemaMessage(decoded); err != nil {
		return fmt.Errorf("%w: the Arrow schema stored in the footer: %v", ErrUnreadable, err)
	}
	r, err := boundedIPCReader(bytes.NewReader(decoded), int64(len(decoded)), memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%w: the Arrow schema stored in the footer: %v", ErrUnreadable, err)
	}
	r.Release()
	return nil
}

func appendLeaves(dst []int, f *pqarrow.SchemaField) []int {
	// IsLeaf is not to be trusted: a nested field's ColIndex is 0, not -1.
	if len(f.Children) == 0 {
		return append(dst, f.ColIndex)
	}
	for i := range f.Children {
		dst = appendLeaves(dst, &f.Children[i])
	}
	return dst
}

func (r *parquetReader) schema() *arrow.Schema { return r.out }
func (r *parquetReader) close()                { r.pf.Close() }

func (r *parquetReader) read(mine func(int) bool, yield func(arrow.RecordBatch, []run) bool) error {
	var groups []int
	var starts, sizes []int64 // file row of each selected group's first row, and its rows
	var at int64
	for g := range r.pf.NumRowGroups() {
		n := r.pf.MetaData().RowGroup(g).NumRows()
		if mine(g) {
			groups, starts, sizes = append(groups, g), append(starts, at), append(sizes, n)
		}
		at += n
	}
	if len(groups) == 0 {
		return nil
	}
	var want, got int64
	for _, n := range sizes {
		want += n
	}
	// runsOf cuts the next m rows read into runs of consecutive file rows.
	cur, used := 0, int64(0) // the selected group being read, rows of it read
	runsOf := func(m int64) []run {
		var runs []run
		for m > 0 && cur < len(sizes) {
			t := min(m, sizes[cur]-used)
			runs = append(runs, run{n: t, fileRow: starts[cur] + used})
			m, used = m-t, used+t
			if used == sizes[cur] {
				cur, used = cur+1, 0
			}
		}
		if m > 0 { // more rows than the footer declares: the count check reports it
			runs = append(runs, run{n: m, fileRow: -1, unit: "rows past the footer's count"})
		}
		return runs
	}
	rr, err := r.fr.GetRecordReader(context.Background(), r.leaves, groups)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		got += rec.NumRows()
		runs := runsOf(rec.NumRows())
		if r.c.columns != nil {
			// Leaf order follows the file; put the fields in the order asked.
			rec = selectColumns(rec, r.out)
			ok := yield(rec, runs)
			rec.Release()
			if !ok {
				return errStop
			}
			continue
		}
		if !yield(rec, runs) {
			return errStop
		}
	}
	// pqarrow reports io.EOF from Err at a normal end, and also when it
	// stopped early on a page it could not decode: only the count tells.
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("row groups %s, after %d rows: %w", groupList(groups), got, err)
	}
	if got != want {
		return fmt.Errorf("%w: read %d rows of the %d its footer declares for row groups %s", ErrRowCount, got, want, groupList(groups))
	}
	return nil
}

// groupList names row groups compactly: "0-3" or "1, 4, 7".
func groupList(groups []int) string {
	if len(groups) > 1 && groups[len(groups)-1]-groups[0] == len(groups)-1 {
		return fmt.Sprintf("%d-%d", groups[0], groups[len(groups)-1])
	}
	s := make([]string, len(groups))
	for i, g := range groups {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ", ")
}

// selectColumns returns the columns of rec named by out's fields, in
// out's order, sharing the data.
func selectColumns(rec arrow.RecordBatch, out *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, out.NumFields())
	for i, f := range out.Fields() {
		cols[i] = rec.Column(rec.Schema().FieldIndices(f.Name)[0])
	}
	return array.NewRecordBatch(out, cols, rec.NumRows())
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// projected returns the schema of the named columns of s.
func projected(s *arrow.Schema, names []string) (*arrow.Schema, error) {
	if names == nil {
		return s, nil
	}
	fields := make([]arrow.Field, len(names))
	for i, name := range names {
		idx := s.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: %q (the file has %s)", ErrColumn, name, fieldNames(s))
		}
		fields[i] = s.Field(idx[0])
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// ---- Arrow IPC ----

type ipcReader struct {
	f      *os.File
	file   *ipc.FileReader // IPC file format, random access by batch
	stream *ipc.Reader     // IPC stream format
	full   *arrow.Schema
	out    *arrow.Schema
	c      *filesConfig
}

func (c *filesConfig) openIPC(path string, mem memory.Allocator) (fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := checkIPCMetadata(f, st.Size(), c.format == format.IPCFile); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	// No message of a file is longer than the file.
	r := &ipcReader{f: f, c: c}
	if c.format == format.IPCFile {
		r.file, err = ipc.NewFileReader(f, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(st.Size()), ipc.WithBodySizeLimit(st.Size()))
		if err == nil {
			r.full = r.file.Schema()
		}
	} else {
		r.stream, err = boundedIPCReader(f, st.Size(), mem)
		if err == nil {
			r.full = r.stream.Schema()
		}
	}
	if err == nil {
		r.out, err = projected(r.full, c.columns)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ipcReader) schema() *arrow.Schema { return r.out }

func (r *ipcReader) close() {
	if r.file != nil {
		r.file.Close()
	}
	if r.stream != nil {
		r.stream.Release()
	}
	r.f.Close()
}

func (r *ipcReader) emit(rec arrow.RecordBatch, at run, yield func(arrow.RecordBatch, []run) bool) bool {
	at.n = rec.NumRows()
	if r.c.columns == nil {
		return yield(rec, []run{at})
	}
	sel := selectColumns(rec, r.out)
	defer sel.Release()
	return yield(sel, []run{at})
}

func (r *ipcReader) read(mine func(int) bool, yield func(arrow.RecordBatch, []run) bool) error {
	if r.file != nil {
		// A file's record batches are read one by one: the file rows are
		// known while every earlier batch was read too.
		row, known := int64(0), true
		for i := range r.file.NumRecords() {
			if !mine(i) {
				known = false
				continue
			}
			rec, err := r.file.RecordBatchAt(i)
			if err != nil {
				return fmt.Errorf("record batch %d: %w", i, err)
			}
			at := run{fileRow: row, unit: fmt.Sprintf("record batch %d", i)}
			if !known {
				at.fileRow = -1
			}
			row += rec.NumRows()
			ok := r.emit(rec, at, yield)
			rec.Release()
			if !ok {
				return errStop
			}
		}
		return nil
	}
	i, row := 0, int64(0)
	for ; r.stream.Next(); i++ {
		rec := r.stream.RecordBatch()
		if mine(i) && !r.emit(rec, run{fileRow: row}, yield) {
			return errStop
		}
		row += rec.NumRows()
	}
	if err := r.stream.Err(); err != nil {
		return fmt.Errorf("record batch %d: %w", i, err)
	}
	return nil
}

// boundedIPCReader reads an IPC stream whose messages are at most limit
// bytes long. (ipc.NewReader drops the size limits it is given, as of
// arrow-go v18.8.0; a message reader keeps them.)
func boundedIPCReader(r io.Reader, limit int64, mem memory.Allocator) (*ipc.Reader, error) {
	// The reader takes the message reader's reference and releases it.
	mr := ipc.NewMessageReader(r, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(limit), ipc.WithBodySizeLimit(limit))
	return ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem))
}

// FilesRows returns the number of rows [Files] would yield for the same
// patterns and options, from file metadata, without reading data: known for
// Parquet files, -1 for the other formats.
func FilesRows(patterns []string, opts ...FilesOption) (int64, error) {
	c, err := newFilesConfig(opts)
	if err != nil {
		return 0, err
	}
	paths, err := Expand(patterns)
	if err != nil {
		return 0, err
	}
	var total int64
	for f, p := range paths {
		if kind, err := format.Of(p); c.format != format.Parquet && (err != nil || kind != format.Parquet) {
			return -1, nil
		}
		if !c.shard.owns(len(paths), f, -1) {
			continue
		}
		err := guard(nil, func() error {
			pf, err := file.OpenParquetFile(p, false)
			if err != nil {
				return err
			}
			defer pf.Close()
			for g := range pf.NumRowGroups() {
				if c.shard.owns(len(paths), f, g) {
					total += pf.MetaData().RowGroup(g).NumRows()
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("dataset: %s: %w", p, err)
		}
	}
	return total, nil
}
