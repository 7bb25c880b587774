package job

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
	"github.com/drainpipe/drainpipe/tensor"
)

// rowColumn carries each row's index among the rows read (a dataset row)
// through the pipeline, so rows set aside and parts can name the input
// rows they cover. It never reaches an output.
const rowColumn = "__drainpipe_row"

// aside collects the rows set aside (SetAside mode) until the part that
// covers them is committed. Rows arrive from the input side and from the
// Predictor's bisection, on different goroutines.
type aside struct {
	mu      sync.Mutex
	rows    []asideRow
	keep    []string
	schema  *arrow.Schema // keys, source_file, file_row, column, reason
	origins *fileset.Origins
	mem     memory.Allocator
	bad     map[origin]badValue // CSV values that did not parse
	// sourceColumn, if set, names the input column of a value the device
	// failed on (a gathered feature's).
	sourceColumn func(error) string
}

type asideRow struct {
	row            int64
	keys           arrow.RecordBatch // one row of the keep columns
	column, reason string
}

type badValue struct{ column, reason string }

type origin struct {
	path string
	row  int64
}

func newAside(in *arrow.Schema, keep []string, origins *fileset.Origins, mem memory.Allocator) *aside {
	var fields []arrow.Field
	for _, k := range keep {
		f := in.Field(in.FieldIndices(k)[0])
		f.Nullable = true
		fields = append(fields, f)
	}
	fields = append(fields,
		arrow.Field{Name: "source_file", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "file_row", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "column", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "reason", Type: arrow.BinaryTypes.String})
	return &aside{keep: keep, schema: arrow.NewSchema(fields, nil), origins: origins, mem: mem, bad: map[origin]badValue{}}
}

// badValue records a CSV value that did not parse; its row is set aside
// when the screen reaches it.
func (a *aside) badValue(path string, fileRow int64, column string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.bad[origin{path, fileRow}]; !seen {
		a.bad[origin{path, fileRow}] = badValue{column, fmt.Sprintf("column %q: %v", column, err)}
	}
}

// add sets row i of rec aside; rec has the keep columns and rowColumn.
func (a *aside) add(rec arrow.RecordBatch, i int, column, reason string) {
	row := rec.Column(rec.Schema().FieldIndices(rowColumn)[0]).(*array.Int64).Value(i)
	cols := make([]arrow.Array, len(a.keep))
	for j, k := range a.keep {
		cols[j] = array.NewSlice(rec.Column(rec.Schema().FieldIndices(k)[0]), int64(i), int64(i+1))
	}
	keys := array.NewRecordBatch(arrow.NewSchema(a.schema.Fields()[:len(a.keep)], nil), cols, 1)
	releaseArrays(cols)
	a.mu.Lock()
	a.rows = append(a.rows, asideRow{row: row, keys: keys, column: column, reason: reason})
	a.mu.Unlock()
}

// predicted is the Predictor's set-aside function: a row the device fails
// on its own.
func (a *aside) predicted(row arrow.RecordBatch, err error) { a.refused(row, 0, err) }

// refused sets aside row i of rec, which a stage or the device failed
// on: err says why, and which column if it can.
func (a *aside) refused(rec arrow.RecordBatch, i int, err error) {
	column := ""
	var re *device.RowError
	if errors.As(err, &re) {
		column = re.Column
	}
	if a.sourceColumn != nil {
		column = cmp.Or(a.sourceColumn(err), column)
	}
	a.add(rec, i, column, err.Error())
}

// take returns the rows set aside before dataset row end, in row order.
func (a *aside) take(end int64) []asideRow {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out, rest []asideRow
	for _, r := range a.rows {
		if r.row < end {
			out = append(out, r)
		} else {
			rest = append(rest, r)
		}
	}
	a.rows = rest
	slices.SortFunc(out, func(x, y asideRow) int { return int(x.row - y.row) })
	return out
}

// release drops the rows not yet written (a failed run finds them again).
func (a *aside) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.rows {
		r.keys.Release()
	}
	a.rows = nil
}

// record builds the set-aside rows as one record of a.schema.
func (a *aside) record(rows []asideRow) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(a.mem, a.schema)
	defer b.Release()
	n := len(a.keep)
	for j := range n {
		for _, r := range rows {
			if err := appendValue(b.Field(j), r.keys.Column(j), 0); err != nil {
				return nil, fmt.Errorf("job: set aside column %q: %w", a.keep[j], err)
			}
		}
	}
	for _, r := range rows {
		o, ok := a.origins.Locate(r.row)
		if !ok {
			o = fileset.Origin{Path: "", Row: -1}
		}
		b.Field(n).(*array.StringBuilder).Append(o.Path)
		b.Field(n + 1).(*array.Int64Builder).Append(o.Row)
		b.Field(n + 2).(*array.StringBuilder).Append(r.column)
		b.Field(n + 3).(*array.StringBuilder).Append(r.reason)
	}
	return b.NewRecordBatch(), nil
}

// appendValue appends value i of arr to b, through Arrow's generic path.
func appendValue(b array.Builder, arr arrow.Array, i int) error {
	if arr.IsNull(i) {
		b.AppendNull()
		return nil
	}
	return b.AppendValueFromString(arr.ValueStr(i))
}

// writePart writes the given rows to a set-aside part of the parts folder
// and returns its size.
func (a *aside) writePart(l layout, name string, rows []asideRow) (size int64, err error) {
	return a.writeRows(l.path(name), l.store, true, rows)
}

// writeFile writes every row set aside, in row order, to c.SetAside (an
// empty file if none was), whole or not at all, and returns their number.
// With no aside (not SetAside mode) it does nothing.
func (a *aside) writeFile(c *Config) (int64, error) {
	if a == nil {
		return 0, nil
	}
	rows := a.take(math.MaxInt64)
	n := int64(len(rows))
	if _, err := a.writeRows(c.SetAside, c.store, c.Overwrite || c.unit != nil, rows); err != nil {
		return 0, fmt.Errorf("job: set aside: %w", err)
	}
	return n, nil
}

// writeRows writes rows, which it releases, to one file and returns its
// size.
func (a *aside) writeRows(path string, store *storage.Opener, overwrite bool, rows []asideRow) (size int64, err error) {
	defer func() {
		for _, r := range rows {
			r.keys.Release()
		}
	}()
	rec, err := a.record(rows)
	if err != nil {
		return 0, err
	}
	defer rec.Release()
	w, err := sink.Create(path, a.schema, sink.WithAllocator(a.mem), sink.WithOverwrite(overwrite), sink.WithOpener(store))
	if err != nil {
		return 0, err
	}
	if err := w.Write(rec); err != nil {
		w.Abort()
		return 0, err
	}
	err = w.Commit()
	return w.Size(), err // the size once the footer is written
}

// screen sets aside, before batching, the rows whose features cannot be
// predicted: a null or ragged tensor row, a null value in it, a null token
// list, a null in a gathered column, a CSV value that did not parse. It
// passes the other rows on, in order.
func (c *Config) screen(ds *dataset.Dataset, a *aside, gathered []string) *dataset.Dataset {
	return dataset.Map(ds, ds.Schema(), func(rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, error) {
		bad := c.badRows(rec, a, gathered)
		if len(bad) == 0 {
			return rec, nil
		}
		for _, b := range bad {
			a.add(rec, b.row, b.column, b.reason)
		}
		return dropRows(a.mem, rec, bad)
	})
}

type badRow struct {
	row            int
	column, reason string
}

// badRows returns the rows of rec that cannot be predicted, in order.
func (c *Config) badRows(rec arrow.RecordBatch, a *aside, gathered []string) []badRow {
	var bad []badRow
	mark := func(i int, column, reason string) {
		if len(bad) == 0 || bad[len(bad)-1].row != i {
			bad = append(bad, badRow{i, column, reason})
		}
	}
	rows := int(rec.NumRows())
	a.mu.Lock()
	anyBad := len(a.bad) > 0
	a.mu.Unlock()
	if anyBad {
		ids := rec.Column(rec.Schema().FieldIndices(rowColumn)[0]).(*array.Int64)
		for i := range rows {
			if o, ok := a.origins.Locate(ids.Value(i)); ok {
				a.mu.Lock()
				v, found := a.bad[origin{o.Path, o.Row}]
				a.mu.Unlock()
				if found {
					mark(i, v.column, v.reason)
				}
			}
		}
	}
	var perRow []badRow
	if len(gathered) > 0 {
		for _, name := range gathered {
			col := rec.Column(rec.Schema().FieldIndices(name)[0])
			for i := 0; col.NullN() > 0 && i < rows; i++ {
				if col.IsNull(i) {
					perRow = append(perRow, badRow{i, name, "null value"})
				}
			}
		}
	} else if c.Tokens {
		for _, name := range []string{c.FeatureColumn, c.TypeIDsColumn} {
			if name == "" {
				continue
			}
			col := rec.Column(rec.Schema().FieldIndices(name)[0])
			for i := 0; col.NullN() > 0 && i < rows; i++ {
				if col.IsNull(i) {
					perRow = append(perRow, badRow{i, name, "null value"}) // token ids, or text
				}
			}
		}
	} else if col := rec.Column(rec.Schema().FieldIndices(c.FeatureColumn)[0]); !c.learnWidth(col) || !goodTensor(col, c.InputSize) {
		for i := range rows {
			one := array.NewSlice(col, int64(i), int64(i+1))
			if _, err := tensor.Float32(one, c.InputSize); err != nil {
				perRow = append(perRow, badRow{i, c.FeatureColumn, err.Error()})
			}
			one.Release()
		}
	}
	if c.Label != "" {
		if col := rec.Column(rec.Schema().FieldIndices(c.Label)[0]); col.NullN() > 0 {
			for i := range rows {
				if col.IsNull(i) {
					perRow = append(perRow, badRow{i, c.Label, "null label"})
				}
			}
		}
	}
	for _, b := range perRow {
		mark(b.row, b.column, b.reason)
	}
	slices.SortStableFunc(bad, func(x, y badRow) int { return x.row - y.row })
	return slices.CompactFunc(bad, func(x, y badRow) bool { return x.row == y.row })
}

// learnWidth sets InputSize, if 0 (Read with no width given), from col:
// its type's, or its first row's with values. It reports whether the
// width is known.
func (c *Config) learnWidth(col arrow.Array) bool {
	if c.InputSize > 0 {
		return true
	}
	if w, err := tensor.Width(col.DataType()); err == nil && w > 0 {
		c.InputSize = w
		return true
	}
	if list, ok := col.(array.ListLike); ok {
		for i := range col.Len() {
			if b, e := list.ValueOffsets(i); col.IsValid(i) && e > b {
				c.InputSize = int(e - b)
				return true
			}
		}
	}
	return false
}

// goodTensor reports whether every row of col is a tensor of width values.
func goodTensor(col arrow.Array, width int) bool {
	_, err := tensor.Float32(col, width)
	return err == nil
}

// dropRows returns rec without the bad rows.
func dropRows(mem memory.Allocator, rec arrow.RecordBatch, bad []badRow) (arrow.RecordBatch, error) {
	rows := make([]int, len(bad))
	for i, b := range bad {
		rows[i] = b.row
	}
	out, err := dataset.WithoutRows(mem, rec, rows)
	if err != nil {
		return nil, fmt.Errorf("setting aside %d rows: %w", len(bad), err)
	}
	return out, nil
}

func releaseArrays(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}
