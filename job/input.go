package job

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
)

// countedInput counts the rows its dataset yields.
type countedInput struct {
	ds   *dataset.Dataset
	rows int64
}

// counted wraps ds to count every row it reads, number each in
// rowColumn, and pass on those from row skip on. In tests, it fails a read.
func (c *Config) counted(ds *dataset.Dataset, skip int64) *countedInput {
	in := &countedInput{}
	fields := append(ds.Schema().Fields(), arrow.Field{Name: rowColumn, Type: arrow.PrimitiveTypes.Int64})
	schema := arrow.NewSchema(fields, nil)
	i := 0 // records read, for the tests' failures
	in.ds = dataset.Map(ds, schema, func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		if first == 0 {
			i = 0 // read again from the start
		}
		if err := c.fail("read", i); err != nil {
			return nil, err
		}
		i++
		in.rows = first + rec.NumRows()
		if in.rows <= skip {
			return nil, nil
		}
		return withRows(c.Allocator, schema, rec, first, max(skip-first, 0)), nil
	})
	return in
}

// withRows returns rows [from, n) of rec with rowColumn appended, the
// record's first row being input row first.
func withRows(mem memory.Allocator, schema *arrow.Schema, rec arrow.RecordBatch, first, from int64) arrow.RecordBatch {
	n := rec.NumRows()
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Reserve(int(n - from))
	for r := from; r < n; r++ {
		b.UnsafeAppend(first + r)
	}
	rows := b.NewArray()
	defer rows.Release()
	cols := append(slices.Clone(rec.Columns()), rows)
	if from == 0 {
		return array.NewRecordBatch(schema, cols, n)
	}
	for i := range len(cols) - 1 {
		cols[i] = array.NewSlice(cols[i], from, n)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(schema, cols, n-from)
}

// fail returns the test's injected failure for the nth event of phase.
func (c *Config) fail(phase string, n int) error {
	if c.inject == nil {
		return nil
	}
	return c.inject(phase, n)
}

// features is the job's input recipe.
func (c *Config) features() fileset.Features {
	f := fileset.Features{Column: c.FeatureColumn, Gather: c.Gather, Width: c.InputSize, Keep: c.kept(), Named: c.FeatureNamed}
	if c.Tokens {
		f.Width = 0 // rows of any length
		if c.TypeIDsColumn != "" {
			f.Keep = append(f.Keep, c.TypeIDsColumn)
		}
	}
	if c.Label != "" {
		f.Exclude = []string{c.Label}
	}
	return f
}

// dataset opens the input files, projected to the columns the job needs,
// before the feature tensor is made of them (feat.Tensor); origins learns
// where each row comes from. It returns the columns the tensor is
// gathered from, if any, and the rows the files declare (-1 if unknown).
func (c *Config) dataset(ctx context.Context, files []string, origins *fileset.Origins) (ds *dataset.Dataset, gathered []string, total int64, err error) {
	feat := c.features()
	opts := append(feat.Options(), fileset.WithShard(c.Shard), fileset.WithReadRows(c.ReadRows), fileset.WithAllocator(c.Allocator),
		fileset.WithMaxMemory(c.MaxMemory), fileset.WithOrigins(origins), fileset.WithOpener(c.store), fileset.WithContext(ctx))
	if c.unit != nil && c.unit.Groups > 0 {
		opts = append(opts, fileset.WithGroups(c.unit.Group, c.unit.Group+c.unit.Groups))
	}
	if c.badValue != nil {
		opts = append(opts, fileset.WithCSVBadValues(c.badValue))
	}
	if c.CSVSample > 0 {
		opts = append(opts, fileset.WithCSVSample(c.CSVSample))
	}
	// Each input is opened once here, for its schema and row count, and
	// again when it is read.
	set, err := fileset.Open(files, opts...)
	if err != nil {
		return nil, nil, 0, err
	}
	if c.Shard.Count > 1 && set.DeclaredRows() == 0 {
		// Shards are dealt whole files, or else row groups (record
		// batches, chunks); a row group is the smallest part of a Parquet
		// file a reader decodes on its own, so it is not split.
		c.Logger.Warn("this shard holds no rows: the input has fewer files and row groups than shards; write it with smaller row groups, or run fewer shards",
			"shard", c.Shard.String(), "files", len(files))
	}
	if ds, gathered, err = feat.Read(set); err != nil {
		return nil, nil, 0, err
	}
	return ds, gathered, set.DeclaredRows(), nil
}
