package fileset

import (
	"context"
	"fmt"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

type filesConfig struct {
	format       format.Format
	columns      []string
	batchRows    int
	decoders     int   // Parquet row groups decoded side by side
	parallelRows int64 // the least rows a group averages for that
	csvSchema    *arrow.Schema
	csvSample    int
	csvNumbers   []string // patterns of CSV columns read as numbers
	csvBadValues func(path string, fileRow int64, column string, err error)
	shard        Shard
	groups       [2]int // WithGroups' range of units; groups[1] 0: all
	mem          memory.Allocator
	maxMemory    int64 // a read's memory ceiling; 0: derived from the file's size
	origins      *Origins
	pqarrowOnly  bool        // tests: read tensor columns through pqarrow too, to compare
	pageCounts   *pageCounts // tests: count the tensor columns' uniform pages
	opener       *storage.Opener
	ctx          context.Context // of every request to an object store
	footers      *footers        // objects' Parquet footers, read once
}

// Option configures [Read] and [Open].
type Option func(*filesConfig)

// WithContext makes ctx the context of every request the reads make to
// an object store or web server: listing, opening, and each read (the
// fetches ahead of the decoders too), so a cancelled ctx ends them at
// once instead of after the requests under way. The default is
// context.Background().
func WithContext(ctx context.Context) Option { return func(c *filesConfig) { c.ctx = ctx } }

// WithFormat sets the format instead of guessing it from file names.
func WithFormat(f format.Format) Option { return func(c *filesConfig) { c.format = f } }

// WithColumns reads only the named columns, in that order.
func WithColumns(names ...string) Option {
	return func(c *filesConfig) { c.columns = append([]string{}, names...) }
}

// WithReadRows sets how many rows a Parquet read or a CSV chunk holds (the
// default is 65536). It bounds the memory a read holds, not the batch size.
func WithReadRows(n int) Option { return func(c *filesConfig) { c.batchRows = n } }

// WithCSVSchema gives the schema of CSV files; without it, it is inferred.
func WithCSVSchema(s *arrow.Schema) Option { return func(c *filesConfig) { c.csvSchema = s } }

// WithCSVBadValues makes a CSV value that does not parse a null, reported
// to fn with its file, file row (from 0, after the header) and column,
// instead of an error that ends the read: for callers that set such rows
// aside. fn is called before the record holding the row is yielded.
func WithCSVBadValues(fn func(path string, fileRow int64, column string, err error)) Option {
	return func(c *filesConfig) { c.csvBadValues = fn }
}

// WithCSVSample sets how many rows of each CSV file the column types are
// inferred from (the default is 10,000). A later value that does not parse
// as its column's type is an error naming the file, row and column.
func WithCSVSample(rows int) Option { return func(c *filesConfig) { c.csvSample = rows } }

// WithCSVNumbers reads the CSV columns whose names match one of the
// patterns (path.Match syntax, as [MatchColumns]) as numbers, whatever the
// sample of rows suggests: int64 if the sample holds only integers, else
// float64. For callers that know a column holds numbers, such as a
// model's features: one value that does not parse is then a bad value of
// its row (an error naming the file, row and column, or a null reported
// to [WithCSVBadValues]), not a column of text.
func WithCSVNumbers(patterns ...string) Option {
	return func(c *filesConfig) { c.csvNumbers = append(c.csvNumbers, patterns...) }
}

// WithShard reads only shard s: whole files when there are at least as many
// files as shards, else row groups (Parquet), record batches (IPC files) or
// chunks (CSV, IPC streams) dealt round-robin.
func WithShard(s Shard) Option { return func(c *filesConfig) { c.shard = s } }

// WithGroups reads only the units [from, to) of each file: row groups
// (Parquet), record batches (IPC files) or chunks (CSV, IPC streams),
// counted from 0. A job's unit of work is such a range of one file's row
// groups: it names the same rows whatever reads it.
func WithGroups(from, to int) Option {
	return func(c *filesConfig) { c.groups = [2]int{from, to} }
}

// WithAllocator sets the allocator of the records read.
func WithAllocator(mem memory.Allocator) Option { return func(c *filesConfig) { c.mem = mem } }

// WithMaxMemory sets the most memory the reader of one file may hold at
// once, records it yielded and not yet released included. A damaged file
// whose length fields ask for more fails with [ErrUnreadable] instead of
// exhausting the machine. The default is 2 GiB plus 16 times the file's
// size.
func WithMaxMemory(bytes int64) Option { return func(c *filesConfig) { c.maxMemory = bytes } }

// WithOpener reads the files through o, which pins each object's
// version from its first look on and counts the traffic of each (see
// storage.Opener): one Opener shared by a job's planning and reading
// makes them see the same objects. By default each call opens its own.
func WithOpener(o *storage.Opener) Option { return func(c *filesConfig) { c.opener = o } }

// WithDecoders sets how many row groups of a local Parquet file are
// decoded side by side, each on a core, ahead of the records' consumer, in
// file order; 1 decodes one after another. The default is 2 on a machine
// of 2 cores or more. Each holds a decoded row group, within the memory
// ceiling.
func WithDecoders(n int) Option { return func(c *filesConfig) { c.decoders = max(n, 1) } }

func newFilesConfig(opts []Option) (*filesConfig, error) {
	c := &filesConfig{opener: storage.NewOpener(), ctx: context.Background(), batchRows: 1 << 16, decoders: min(runtime.GOMAXPROCS(0), 2), parallelRows: 1024, shard: Shard{0, 1}, mem: memory.DefaultAllocator, csvSample: 10_000,
		footers: &footers{byPath: map[string]*metadata.FileMetaData{}}}
	for _, o := range opts {
		o(c)
	}
	if err := c.shard.check(); err != nil {
		return nil, err
	}
	if c.batchRows <= 0 {
		return nil, fmt.Errorf("fileset: read rows %d, want > 0", c.batchRows)
	}
	return c, nil
}
