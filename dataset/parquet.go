package dataset

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

type parquetReader struct {
	c      *filesConfig
	mem    memory.Allocator
	pf     *file.Reader
	fr     *pqarrow.FileReader
	leaves []int
	full   *arrow.Schema // the file's
	out    *arrow.Schema // the columns read
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
	r.full, r.out = full, full
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

func (r *parquetReader) declared(mine func(int) bool) int64 {
	var n int64
	for g := range r.pf.NumRowGroups() {
		if mine(g) {
			n += r.pf.MetaData().RowGroup(g).NumRows()
		}
	}
	return n
}

func (r *parquetReader) close() { r.pf.Close() }

// selection is the row groups a read covers.
type selection struct {
	groups        []int
	starts, sizes []int64 // file row of each group's first row, and its rows
	rows          int64
}

func (r *parquetReader) selection(mine func(int) bool) selection {
	var s selection
	var at int64
	for g := range r.pf.NumRowGroups() {
		n := r.pf.MetaData().RowGroup(g).NumRows()
		if mine(g) {
			s.groups, s.starts, s.sizes = append(s.groups, g), append(s.starts, at), append(s.sizes, n)
			s.rows += n
		}
		at += n
	}
	return s
}

// runCutter returns a function that cuts the next m rows read into runs of
// consecutive file rows.
func (s selection) runCutter() func(m int64) []run {
	cur, used := 0, int64(0) // the group being read, rows of it read
	return func(m int64) []run {
		var runs []run
		for m > 0 && cur < len(s.sizes) {
			t := min(m, s.sizes[cur]-used)
			runs = append(runs, run{n: t, fileRow: s.starts[cur] + used})
			m, used = m-t, used+t
			if used == s.sizes[cur] {
				cur, used = cur+1, 0
			}
		}
		if m > 0 { // more rows than the footer declares: the count check reports it
			runs = append(runs, run{n: m, fileRow: -1, unit: "rows past the footer's count"})
		}
		return runs
	}
}

func (r *parquetReader) records(mine func(int) bool) iter.Seq2[piece, error] {
	return func(yield func(piece, error) bool) {
		sel := r.selection(mine)
		if len(sel.groups) == 0 {
			return
		}
		read, done := r.tensorRecords(sel, yield)
		if !done {
			r.pqarrowRecords(sel, read, yield)
		}
	}
}

// pqarrowRecords reads the selection through pqarrow, skipping its first
// skip rows (yielded already): from the group that holds the next row.
func (r *parquetReader) pqarrowRecords(sel selection, skip int64, yield func(piece, error) bool) {
	cut := sel.runCutter()
	cut(skip)
	var got int64
	from := 0
	for from < len(sel.groups)-1 && skip >= sel.sizes[from] {
		skip, got = skip-sel.sizes[from], got+sel.sizes[from]
		from++
	}
	rr, err := r.fr.GetRecordReader(context.Background(), r.leaves, sel.groups[from:])
	if err != nil {
		yield(piece{}, err)
		return
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		got += n
		if skip >= n {
			skip -= n
			continue
		}
		if skip > 0 || r.c.columns != nil {
			if skip > 0 {
				rec = rec.NewSlice(skip, n)
			} else {
				rec.Retain()
			}
			if r.c.columns != nil {
				// Leaf order follows the file; put the fields in the order asked.
				sel := selectColumns(rec, r.out)
				rec.Release()
				rec = sel
			}
			ok := yield(piece{rec, cut(rec.NumRows())}, nil)
			rec.Release()
			skip = 0
			if !ok {
				return
			}
			continue
		}
		if !yield(piece{rec, cut(n)}, nil) {
			return
		}
	}
	// pqarrow reports io.EOF from Err at a normal end, and also when it
	// stopped early on a page it could not decode: only the count tells.
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		yield(piece{}, fmt.Errorf("row groups %s, after %d rows: %w", groupList(sel.groups), got, err))
		return
	}
	if got != sel.rows {
		yield(piece{}, fmt.Errorf("%w: read %d rows of the %d its footer declares for row groups %s", ErrRowCount, got, sel.rows, groupList(sel.groups)))
		return
	}
}

// tensorRecords reads the selection with its tensor columns decoded by
// tensorColumn and the others by pqarrow, and returns the rows it yielded
// and whether it read them all (or the consumer stopped). It reads nothing
// if the file has no tensor column; it stops without an error at the first
// rows its tensor columns cannot read, and at any failure: pqarrow then
// reads the rest and reports what is wrong.
func (r *parquetReader) tensorRecords(sel selection, yield func(piece, error) bool) (read int64, done bool) {
	if r.c.pqarrowOnly {
		return 0, false
	}
	var tensors []*tensorColumn
	var rest []int // the other fields' leaves
	for i, f := range r.out.Fields() {
		idx := r.full.FieldIndices(f.Name)
		if len(idx) != 1 {
			return 0, false
		}
		leaves := appendLeaves(nil, &r.fr.Manifest.Fields[idx[0]])
		if t := newTensorColumn(r.pf, r.mem, sel.groups, i, f, leaves); t != nil {
			tensors = append(tensors, t)
			continue
		}
		rest = append(rest, leaves...)
	}
	defer func() {
		for _, t := range tensors {
			t.release()
		}
	}()
	if len(tensors) == 0 {
		return 0, false
	}
	var rr pqarrow.RecordReader
	if len(rest) > 0 {
		var err error
		if rr, err = r.fr.GetRecordReader(context.Background(), rest, sel.groups); err != nil {
			return 0, false
		}
		defer rr.Release()
	}
	cut := sel.runCutter()
	for {
		var others arrow.RecordBatch
		var n int64
		if rr != nil {
			if !rr.Next() {
				break
			}
			others = rr.RecordBatch()
			n = others.NumRows()
		} else if n = min(int64(r.c.batchRows), sel.rows-read); n == 0 {
			break
		}
		rec, ok := r.tensorRecord(tensors, others, n)
		if !ok {
			return read, false
		}
		read += n
		more := yield(piece{rec, cut(n)}, nil)
		rec.Release()
		if !more {
			return read, true
		}
	}
	if rr != nil && rr.Err() != nil && !errors.Is(rr.Err(), io.EOF) {
		return read, false
	}
	if read != sel.rows {
		return read, false
	}
	for _, t := range tensors {
		if !t.finished() {
			return read, false
		}
	}
	return read, true
}

// tensorRecord reads the next n rows of the tensor columns and puts them
// with the other columns' (from others, nil if there are none) in a
// record of the output schema; false if a tensor column cannot read them.
func (r *parquetReader) tensorRecord(tensors []*tensorColumn, others arrow.RecordBatch, n int64) (arrow.RecordBatch, bool) {
	cols := make([]arrow.Array, r.out.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for _, t := range tensors {
		var ok bool
		if cols[t.field], ok = t.read(n); !ok {
			return nil, false
		}
	}
	for i, f := range r.out.Fields() {
		if cols[i] == nil {
			cols[i] = others.Column(others.Schema().FieldIndices(f.Name)[0])
			cols[i].Retain()
		}
	}
	return array.NewRecordBatch(r.out, cols, n), true
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
