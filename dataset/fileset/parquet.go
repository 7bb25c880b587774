package fileset

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/storage"
)

type parquetReader struct {
	ahead  *prefetcher // an object's, else nil
	c      *filesConfig
	mem    memory.Allocator
	pf     *file.Reader
	fr     *pqarrow.FileReader
	leaves []int
	full   *arrow.Schema // the file's
	out    *arrow.Schema // the columns read
}

func (c *filesConfig) openParquet(path string, mem memory.Allocator) (fileReader, error) {
	f, err := c.opener.Open(c.ctx, path)
	if err != nil {
		return nil, err
	}
	var ahead *prefetcher
	if storage.IsURL(path) {
		limit, _ := mem.(*ceiling)
		ahead = newPrefetcher(c.ctx, f, limit)
		f = ahead
	}
	// Pages are read as they are decoded, through a buffer, not a whole
	// column chunk at once into a fresh (zeroed) slice: a fifth of a float
	// tensor read's time went to clearing that memory. (An object's chunks
	// are fetched whole ahead of the decoder, by the prefetcher.)
	props := parquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	opts := []file.ReadOption{file.WithReadProps(props)}
	known := c.footers.get(path)
	if known != nil {
		opts = append(opts, file.WithMetadata(known))
	}
	pf, err := file.NewParquetReader(f, opts...)
	if err != nil {
		f.Close()
		return nil, err
	}
	if known == nil && storage.IsURL(path) {
		c.footers.put(path, pf.MetaData())
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
	r := &parquetReader{c: c, mem: mem, pf: pf, fr: fr, ahead: ahead}
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
				return nil, fmt.Errorf("%w: %q (the file has %s)", dataset.ErrColumn, name, dataset.FieldNames(full))
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
		if r.ahead != nil {
			r.ahead.plan(r.pf, sel.groups, r.leaves, r.c.batchRows)
		}
		// An object's groups are fetched ahead in order (the prefetcher);
		// a local file's are decoded side by side, when they are large
		// enough to pay for their own readers and goroutine.
		if w := r.c.decoders; w > 1 && len(sel.groups) > 1 && r.ahead == nil && sel.rows/int64(len(sel.groups)) >= r.c.parallelRows {
			r.parallelRecords(sel, w, yield)
			return
		}
		r.sequential(sel, yield)
	}
}

// pqarrowRecords reads the selection through pqarrow.
func (r *parquetReader) pqarrowRecords(sel selection, yield func(piece, error) bool) {
	cut := sel.runCutter()
	rr, err := r.fr.GetRecordReader(r.c.ctx, r.leaves, sel.groups)
	if err != nil {
		yield(piece{}, err)
		return
	}
	defer rr.Release()
	var got int64
	for rr.Next() {
		rec := rr.RecordBatch()
		got += rec.NumRows()
		if r.c.columns == nil {
			if !yield(piece{rec, cut(rec.NumRows())}, nil) {
				return
			}
			continue
		}
		// Leaf order follows the file; put the fields in the order asked.
		sel := selectColumns(rec, r.out)
		more := yield(piece{sel, cut(sel.NumRows())}, nil)
		sel.Release()
		if !more {
			return
		}
	}
	r.checkEnd(sel, rr, got, yield)
}

// checkEnd reports how a pqarrow read of the selection that yielded got
// rows ended: pqarrow reports io.EOF from Err at a normal end, and also
// when it stopped early on a page it could not decode, so only the count
// tells.
func (r *parquetReader) checkEnd(sel selection, rr pqarrow.RecordReader, got int64, yield func(piece, error) bool) bool {
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return yield(piece{}, fmt.Errorf("row groups %s, after %d rows: %w", groupList(sel.groups), got, err))
	}
	if got != sel.rows {
		return yield(piece{}, fmt.Errorf("%w: read %d rows of the %d its footer declares for row groups %s", ErrRowCount, got, sel.rows, groupList(sel.groups)))
	}
	return true
}

// tensorColumns returns a reader for each float list column read (see
// tensorColumn), and the leaves of the other columns; none if tensor
// columns are to be read through pqarrow too.
func (r *parquetReader) tensorColumns(sel selection) (tensors []*tensorColumn, rest []int) {
	if r.c.pqarrowOnly {
		return nil, nil
	}
	for i, f := range r.out.Fields() {
		idx := r.full.FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, nil
		}
		sf := &r.fr.Manifest.Fields[idx[0]]
		if t := newTensorColumn(r.pf, r.mem, sel, i, f, sf); t != nil {
			t.counts = r.c.pageCounts
			tensors = append(tensors, t)
			continue
		}
		rest = appendLeaves(rest, sf)
	}
	return tensors, rest
}

// tensorRecords reads the selection with its tensor columns decoded by
// tensorColumn and the others (the leaves rest) by pqarrow, in step.
func (r *parquetReader) tensorRecords(sel selection, tensors []*tensorColumn, rest []int, yield func(piece, error) bool) {
	defer func() {
		for _, t := range tensors {
			t.release()
		}
	}()
	var rr pqarrow.RecordReader
	if len(rest) > 0 {
		var err error
		if rr, err = r.fr.GetRecordReader(r.c.ctx, rest, sel.groups); err != nil {
			yield(piece{}, err)
			return
		}
		defer rr.Release()
	}
	cut := sel.runCutter()
	var read int64
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
		rec, err := r.tensorRecord(tensors, others, n)
		if err != nil {
			yield(piece{}, err)
			return
		}
		read += n
		more := yield(piece{rec, cut(n)}, nil)
		rec.Release()
		if !more {
			return
		}
	}
	if rr != nil && !r.checkEnd(sel, rr, read, yield) {
		return
	}
	for _, t := range tensors {
		if err := t.finished(); err != nil {
			yield(piece{}, fmt.Errorf("%w: %w", ErrRowCount, err))
			return
		}
	}
}

// tensorRecord reads the next n rows of the tensor columns and puts them
// with the other columns' (from others, nil if there are none) in a
// record of the output schema.
func (r *parquetReader) tensorRecord(tensors []*tensorColumn, others arrow.RecordBatch, n int64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, r.out.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for _, t := range tensors {
		var err error
		if cols[t.field], err = t.read(n); err != nil {
			return nil, err
		}
	}
	for i, f := range r.out.Fields() {
		if cols[i] == nil {
			cols[i] = others.Column(others.Schema().FieldIndices(f.Name)[0])
			cols[i].Retain()
		}
	}
	return array.NewRecordBatch(r.out, cols, n), nil
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

// footers are the Parquet footers of the objects a Set opened to plan,
// kept for its reads: an object's footer costs its requests (a round trip
// each) once, not once more a read. Objects are pinned, so the footer is
// the one of the version read. Local files read theirs again.
type footers struct {
	mu     sync.Mutex
	byPath map[string]*metadata.FileMetaData
}

func (f *footers) get(path string) *metadata.FileMetaData {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byPath[path]
}

func (f *footers) put(path string, md *metadata.FileMetaData) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byPath[path] = md
}
