package dataset

import "github.com/drainpipe/drainpipe/format"

// WithPqarrowOnly reads tensor columns through pqarrow too, for tests that
// compare the two paths.
func WithPqarrowOnly() FilesOption { return func(c *filesConfig) { c.pqarrowOnly = true } }

// TensorPathRows reads a Parquet file's row groups as [Files] does, and
// returns the rows the tensor path yielded before it handed over to
// pqarrow, and whether it read them all.
func TensorPathRows(path string, opts ...FilesOption) (rows int64, all bool, err error) {
	c, err := newFilesConfig(append(opts, WithFormat(format.Parquet)))
	if err != nil {
		return 0, false, err
	}
	r, err := c.open(path)
	if err != nil {
		return 0, false, err
	}
	defer r.close()
	pr := r.(*parquetReader)
	rows, all = pr.tensorRecords(pr.selection(func(int) bool { return true }), func(piece, error) bool { return true })
	return rows, all, nil
}
