package fileset

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

var (
	// ErrNoFiles reports a pattern that matches no file.
	ErrNoFiles = errors.New("no input files")
	// ErrFormat reports files of mixed formats, or a format the sources do
	// not read.
	ErrFormat = errors.New("mixed or unreadable file formats")
	// ErrShard reports a malformed shard spec or index.
	ErrShard = errors.New("bad shard")
)

// Expand returns the files the patterns name, in a stable (sorted) order,
// each once: local paths and globs, or URLs of objects (s3://, gs://,
// azblob://, with globs in their keys; see package storage). A pattern
// without glob characters must name an existing file; a glob must match
// at least one.
func Expand(patterns []string) ([]string, error) {
	return ExpandContext(context.Background(), patterns)
}

// ExpandContext is Expand with its listings made under ctx, through the
// Opener of WithOpener if given (which pins an object named without a
// glob, so that its reads through that Opener make no look of their
// own); the other options are not used.
func ExpandContext(ctx context.Context, patterns []string, opts ...Option) ([]string, error) {
	var c filesConfig
	for _, opt := range opts {
		opt(&c)
	}
	o := c.opener
	if o == nil {
		o = storage.NewOpener()
		defer o.Close()
	}
	return expand(ctx, o, patterns)
}

func expand(ctx context.Context, o *storage.Opener, patterns []string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		m, err := o.Glob(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("fileset: %w", err)
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

// Set is a list of input files opened once, before any is read: one
// format, one schema, and the rows their metadata declares. Its Dataset method
// reads them, in sorted order, as one stream.
type Set struct {
	c      *filesConfig
	paths  []string
	schema *arrow.Schema
	rows   int64 // declared for the shard; -1 if a file does not say
}

// Open opens the files the patterns name (each once, for its schema
// and metadata). All files must have one format and one schema.
func Open(patterns []string, opts ...Option) (*Set, error) {
	c, err := newFilesConfig(opts)
	if err != nil {
		return nil, err
	}
	paths, err := expand(c.ctx, c.opener, patterns)
	if err != nil {
		return nil, err
	}
	if c.format == format.Auto {
		// Every file's name must say the first one's format.
		for i, p := range paths {
			f, err := format.Of(p)
			if err != nil {
				return nil, fmt.Errorf("fileset: %w", err)
			}
			if i > 0 && f != c.format {
				return nil, fmt.Errorf("%w: %s is %s, %s is %s", ErrFormat, p, f, paths[0], c.format)
			}
			c.format = f
		}
	}
	// The full schemas: columns are chosen by Dataset.
	full := *c
	full.columns = nil
	set := &Set{c: c, paths: paths}
	// Each file is opened for its schema and rows; objects side by side,
	// as a request each costs a round trip.
	schemas, declared, errs := make([]*arrow.Schema, len(paths)), make([]int64, len(paths)), make([]error, len(paths))
	var g errgroup.Group
	g.SetLimit(planners(paths))
	for f, p := range paths {
		g.Go(func() error {
			r, err := full.open(p)
			if err != nil {
				errs[f] = err
				return nil
			}
			schemas[f] = r.schema()
			declared[f] = r.declared(func(unit int) bool { return c.owns(len(paths), f, unit) })
			r.close()
			return nil
		})
	}
	g.Wait()
	for f, p := range paths {
		s, n, err := schemas[f], declared[f], errs[f]
		if err != nil {
			return nil, err // the first file's in order, as a reading one by one would
		}
		if set.schema == nil {
			set.schema = s
		} else if set.schema, err = unify(set.schema, s); err != nil {
			return nil, fmt.Errorf("%w: %s and %s: %v", dataset.ErrSchemaMismatch, paths[0], p, err)
		}
		switch {
		case n < 0 || set.rows < 0:
			set.rows = -1
		case c.shard.owns(len(paths), f, -1):
			set.rows += n
		}
	}
	return set, nil
}

// planners is how many files Open opens at once: objects side by side
// (their time is the store's round trips), local files one at a time.
func planners(paths []string) int {
	if slices.ContainsFunc(paths, storage.IsURL) {
		return 16
	}
	return 1
}

// Paths returns the files, in the order they are read.
func (s *Set) Paths() []string { return s.paths }

// Schema returns the files' schema, every column.
func (s *Set) Schema() *arrow.Schema { return s.schema }

// DeclaredRows returns the rows the files' metadata declare for the shard
// read (Parquet footers), or -1 if a file declares none.
func (s *Set) DeclaredRows() int64 { return s.rows }

// Dataset returns a dataset reading the named columns of the files, in that
// order (none: every column, or those of WithColumns).
func (s *Set) Dataset(columns ...string) (*dataset.Dataset, error) {
	c := *s.c
	if len(columns) > 0 {
		c.columns = columns
	}
	schema, err := projected(s.schema, c.columns)
	if err != nil {
		return nil, fmt.Errorf("fileset: %s: %w", s.paths[0], err)
	}
	paths := s.paths
	// Files that differ only in nullability give records of their own
	// schema; they are relabelled with the set's, zero-copy.
	relabel := func(yield func(arrow.RecordBatch, error) bool) func(arrow.RecordBatch, error) bool {
		return func(rec arrow.RecordBatch, err error) bool {
			if err != nil || rec.Schema() == schema || rec.Schema().Equal(schema) {
				return yield(rec, err)
			}
			same := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
			defer same.Release()
			return yield(same, nil)
		}
	}
	return dataset.New(schema, func(yield func(arrow.RecordBatch, error) bool) {
		c.origins.reset()
		for f, p := range paths {
			if !c.readFile(f, len(paths), p, relabel(yield)) {
				return
			}
		}
	}), nil
}

// unify returns the schema of files of schemas a and b: a, with a field
// nullable where either is. Any other difference is an error naming the
// first differing field.
func unify(a, b *arrow.Schema) (*arrow.Schema, error) {
	if a.Equal(b) {
		return a, nil
	}
	if a.NumFields() != b.NumFields() {
		return nil, fmt.Errorf("%d fields against %d (%s; %s)", a.NumFields(), b.NumFields(), dataset.FieldNames(a), dataset.FieldNames(b))
	}
	fields := a.Fields()
	for i, fa := range fields {
		fb := b.Field(i)
		switch {
		case fa.Name != fb.Name:
			return nil, fmt.Errorf("field %d is %q against %q", i, fa.Name, fb.Name)
		case !arrow.TypeEqual(fa.Type, fb.Type):
			return nil, fmt.Errorf("field %q is %s against %s", fa.Name, fa.Type, fb.Type)
		}
		fields[i].Nullable = fa.Nullable || fb.Nullable
	}
	md := a.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// Read returns a dataset over the files the patterns name, read in sorted
// order as one stream: Open, then its Dataset method.
func Read(patterns []string, opts ...Option) (*dataset.Dataset, error) {
	set, err := Open(patterns, opts...)
	if err != nil {
		return nil, err
	}
	return set.Dataset()
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
	mine := func(unit int) bool { return c.owns(files, f, unit) }
	inYield, stopped := false, false
	err = guard(&inYield, func() error {
		for p, err := range r.records(mine) {
			if err != nil {
				return err
			}
			c.origins.add(path, p.runs)
			inYield = true
			ok := yield(p.rec, nil)
			inYield = false
			if !ok {
				stopped = true
				return nil
			}
		}
		return nil
	})
	if stopped {
		return false
	}
	if err != nil && !errors.Is(err, ErrUnreadable) && !errors.Is(err, ErrCSVValue) {
		err = fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if err != nil {
		return yield(nil, &dataset.SourceError{Where: path, Err: err})
	}
	return true
}

// fileReader reads one file. records yields the records of the units mine
// accepts (row groups, record batches, or chunks), each borrowed for one
// iteration with the runs of file rows it holds; a failure is yielded last.
type fileReader interface {
	schema() *arrow.Schema
	// declared returns the rows the file's metadata declares for the units
	// mine accepts, or -1 if it declares none.
	declared(mine func(unit int) bool) int64
	records(mine func(unit int) bool) iter.Seq2[piece, error]
	close()
}

// piece is a record a file reader yields and the file rows it holds.
type piece struct {
	rec  arrow.RecordBatch
	runs []run
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
		return nil, fmt.Errorf("fileset: %s: %w", path, err)
	}
	return r, nil
}

// fileMemory returns the allocator for reading path: the configured one,
// under the file's memory ceiling.
func (c *filesConfig) fileMemory(path string) (memory.Allocator, error) {
	limit := c.maxMemory
	if limit <= 0 {
		st, err := c.opener.Pin(c.ctx, path) // an object's first look, or no request
		if err != nil {
			return nil, err
		}
		limit = defaultMemoryCeiling + 16*st.Size
	}
	return &ceiling{mem: c.mem, limit: limit}, nil
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

// projected returns the schema of the named columns of s.
func projected(s *arrow.Schema, names []string) (*arrow.Schema, error) {
	if names == nil {
		return s, nil
	}
	fields := make([]arrow.Field, len(names))
	for i, name := range names {
		idx := s.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: %q (the file has %s)", dataset.ErrColumn, name, dataset.FieldNames(s))
		}
		fields[i] = s.Field(idx[0])
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md), nil
}

// Rows returns the number of rows [Read] would yield for the same
// patterns and options, from file metadata, without reading data: known for
// Parquet files, -1 for the other formats.
func Rows(patterns []string, opts ...Option) (int64, error) {
	set, err := Open(patterns, opts...)
	if err != nil {
		return 0, err
	}
	return set.DeclaredRows(), nil
}
