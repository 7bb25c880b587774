package sink

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// groupEncoder encodes a row group of a file into memory: its tensor
// columns itself (tensorColumn), the others with arrow-go, as a Parquet
// file of those columns alone.
type groupEncoder struct {
	schema     *arrow.Schema
	pq         *schema.Schema
	props      *parquet.WriterProperties
	arrowProps pqarrow.ArrowWriterProperties
	mem        memory.Allocator
	leaves     [][]int         // the leaf columns of each field
	tensors    []*tensorColumn // of each field; nil where arrow-go encodes it
}

func newGroupEncoder(s *arrow.Schema, props *parquet.WriterProperties, arrowProps pqarrow.ArrowWriterProperties, mem memory.Allocator) (*groupEncoder, error) {
	pq, err := pqarrow.ToParquet(s, props, arrowProps)
	if err != nil {
		return nil, err
	}
	e := &groupEncoder{schema: s, pq: pq, props: props, arrowProps: arrowProps, mem: mem,
		leaves: make([][]int, s.NumFields()), tensors: make([]*tensorColumn, s.NumFields())}
	root := pq.Root()
	if root.NumFields() != s.NumFields() {
		return nil, fmt.Errorf("%d fields make %d parquet fields", s.NumFields(), root.NumFields())
	}
	for j := range pq.NumColumns() {
		for f := range root.NumFields() {
			if root.Field(f) == pq.ColumnRoot(j) {
				e.leaves[f] = append(e.leaves[f], j)
			}
		}
	}
	for f, field := range s.Fields() {
		var cols []*schema.Column
		for _, j := range e.leaves[f] {
			cols = append(cols, pq.Column(j))
		}
		e.tensors[f] = tensorColumnOf(field, cols, props)
	}
	return e, nil
}

// column returns field f's arrays in group.
func column(group []arrow.RecordBatch, f int) []arrow.Array {
	arrs := make([]arrow.Array, len(group))
	for i, r := range group {
		arrs[i] = r.Column(f)
	}
	return arrs
}

// encode writes group, records of rows rows in all, as the one row group
// of a file in memory, into file (arrow-go's columns) and tensors. It
// returns the group's metadata and, for each leaf column, the bytes its
// offsets are into.
func (e *groupEncoder) encode(group []arrow.RecordBatch, rows int64, file, tensors *bytes.Buffer) (*metadata.FileMetaData, [][]byte, error) {
	fast := make([]bool, len(e.tensors))
	var rest, fastFields []int
	for f, t := range e.tensors {
		fast[f] = t != nil && rows > 0 && holdsNoNull(column(group, f))
		if fast[f] {
			fastFields = append(fastFields, f)
		} else {
			rest = append(rest, f)
		}
	}
	srcs := make([][]byte, e.pq.NumColumns())
	var sub *metadata.FileMetaData
	if len(rest) > 0 {
		file.Grow(encodedBound(group, rest))
		var err error
		if sub, err = e.encodeFields(file, group, rows, rest); err != nil {
			return nil, nil, err
		}
		end, err := footerStart(file.Bytes())
		if err != nil {
			return nil, nil, err
		}
		if n := len(sub.RowGroups); n != 1 {
			return nil, nil, fmt.Errorf("arrow-go wrote %d row groups, want 1", n)
		}
		for j := range srcs {
			srcs[j] = file.Bytes()[:end]
		}
		if len(rest) == len(e.tensors) {
			return sub, srcs, nil
		}
	}
	tensors.Grow(encodedBound(group, fastFields))
	// The group's metadata: arrow-go's column chunks copied, the tensor
	// columns' finished by their page writers.
	fmb := metadata.NewFileMetadataBuilder(e.pq, e.props, nil)
	rgb := fmb.AppendRowGroup()
	rgb.SetNumRows(int(rows))
	copied := 0
	for f := range e.tensors {
		for _, j := range e.leaves[f] {
			cb := rgb.NextColumnChunk()
			if !fast[f] {
				*cb.Contents() = *sub.RowGroups[0].Columns[copied]
				copied++
				continue
			}
			if err := e.tensors[f].writeChunk(tensors, cb, int16(j), column(group, f), e.mem); err != nil {
				return nil, nil, err
			}
		}
	}
	for f, isFast := range fast {
		if isFast {
			srcs[e.leaves[f][0]] = tensors.Bytes()
		}
	}
	if err := rgb.Finish(0, 0); err != nil {
		return nil, nil, err
	}
	md, err := fmb.Finish()
	return md, srcs, err
}

// encodedBound is about the most bytes fields fs of group take encoded:
// their Arrow bytes and an eighth, for levels, page headers and what
// compression adds to incompressible values. A buffer made this size at
// once is not grown, and copied, a doubling at a time; the first group of
// every file paid that, and a job's parts are files of a group or two.
func encodedBound(group []arrow.RecordBatch, fs []int) int {
	var bits int64
	for _, r := range group {
		for _, f := range fs {
			bits += rowBits(r.Column(f), 0, r.NumRows())
		}
	}
	return int(bits/8+bits/64) + 4096
}

// encodeFields writes the fields fs of group as a Parquet file of one row
// group into file, with arrow-go, and returns its metadata.
func (e *groupEncoder) encodeFields(file *bytes.Buffer, group []arrow.RecordBatch, rows int64, fs []int) (*metadata.FileMetaData, error) {
	s := e.schema
	if len(fs) < s.NumFields() {
		fields := make([]arrow.Field, len(fs))
		for i, f := range fs {
			fields[i] = s.Field(f)
		}
		s = arrow.NewSchema(fields, nil)
		projected := make([]arrow.RecordBatch, len(group))
		for i, r := range group {
			cols := make([]arrow.Array, len(fs))
			for k, f := range fs {
				cols[k] = r.Column(f)
			}
			projected[i] = array.NewRecordBatch(s, cols, r.NumRows())
		}
		defer releaseAll(projected)
		group = projected
	}
	pq, err := pqarrow.NewFileWriter(s, file, e.props, e.arrowProps)
	if err != nil {
		return nil, err
	}
	if err := writeGroup(pq, group, rows); err != nil {
		pq.Close()
		return nil, err
	}
	if err := pq.Close(); err != nil {
		return nil, err
	}
	return pq.FileMetadata()
}
