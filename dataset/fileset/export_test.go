package fileset

import "github.com/drainpipe/drainpipe/format"

// WithPqarrowOnly reads tensor columns through pqarrow too, for tests that
// compare the two paths.
func WithPqarrowOnly() Option { return func(c *filesConfig) { c.pqarrowOnly = true } }

// PageCounts counts the pages tensor columns read as uniform (without
// expanding their levels) and the chunks they fell back in.
type PageCounts = pageCounts

func (p *PageCounts) Uniform() int64   { return p.uniform.Load() }
func (p *PageCounts) FallBacks() int64 { return p.fallBacks.Load() }

// WithPageCounts counts the tensor columns' pages into p.
func WithPageCounts(p *PageCounts) Option { return func(c *filesConfig) { c.pageCounts = p } }

// TensorPathColumns returns the columns of a Parquet file that [Files]
// decodes with its own float list decoder rather than pqarrow's.
func TensorPathColumns(path string, opts ...Option) ([]string, error) {
	c, err := newFilesConfig(append(opts, WithFormat(format.Parquet)))
	if err != nil {
		return nil, err
	}
	r, err := c.open(path)
	if err != nil {
		return nil, err
	}
	defer r.close()
	pr := r.(*parquetReader)
	tensors, _ := pr.tensorColumns(pr.selection(func(int) bool { return true }))
	var names []string
	for _, t := range tensors {
		names = append(names, t.name)
		t.release()
	}
	return names, nil
}

// WithParallelRows sets the least rows a row group averages for a file's
// groups to be decoded side by side, so tests reach that path on small
// files.
func WithParallelRows(n int64) Option { return func(c *filesConfig) { c.parallelRows = n } }
