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

func (r *parquetReader) records(mine func(int) bool) iter.Seq2[piece, error] {
	return func(yield func(piece, error) bool) {
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
			return
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
			yield(piece{}, err)
			return
		}
		defer rr.Release()
		for rr.Next() {
			rec := rr.RecordBatch()
			got += rec.NumRows()
			runs := runsOf(rec.NumRows())
			if r.c.columns != nil {
				// Leaf order follows the file; put the fields in the order asked.
				rec = selectColumns(rec, r.out)
				ok := yield(piece{rec, runs}, nil)
				rec.Release()
				if !ok {
					return
				}
				continue
			}
			if !yield(piece{rec, runs}, nil) {
				return
			}
		}
		// pqarrow reports io.EOF from Err at a normal end, and also when it
		// stopped early on a page it could not decode: only the count tells.
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			yield(piece{}, fmt.Errorf("row groups %s, after %d rows: %w", groupList(groups), got, err))
			return
		}
		if got != want {
			yield(piece{}, fmt.Errorf("%w: read %d rows of the %d its footer declares for row groups %s", ErrRowCount, got, want, groupList(groups)))
			return
		}
	}
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
