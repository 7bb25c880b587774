package sink

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Row groups encoded into memory, then spliced into the output. arrow-go's
// file writer writes a file's row groups one after another, each column
// straight to the output, on one core. Here each row group is encoded
// into memory (groupEncoder), on a goroutine of its own where there are
// encoders to spare, and the groups are spliced into the output in order:
// each column chunk's pages are copied, and the offsets in the group's
// metadata are moved to where the pages land. A page holds no offset, so
// its bytes are the same wherever it lands. The footer is the one arrow-go
// makes for the file's schema and key-value metadata, with the spliced
// row groups.

// magic begins and ends a Parquet file.
var magic = []byte("PAR1")

// splicer encodes up to encoders row groups at once beside its caller
// (none: on its caller's goroutine) and splices them into the output in
// the order they came.
type splicer struct {
	enc      *groupEncoder
	encoders int
	pending  []*encodedGroup // in the order they came
	free     []*bytes.Buffer // the buffers of spliced groups, for reuse
	groups   []*metadata.FileMetaData
	pos      int64 // bytes written to the output
}

// encodedGroup is a row group encoded into memory: metadata of one row
// group whose column i's offsets are into srcs[i].
type encodedGroup struct {
	done chan struct{}
	bufs [2]*bytes.Buffer
	meta *metadata.FileMetaData
	srcs [][]byte
	err  error
}

func newSplicer(enc *groupEncoder, encoders int) *splicer {
	return &splicer{enc: enc, encoders: max(encoders, 0)}
}

// encode encodes group, records of rows rows in all, as a row group; it
// takes group. With no encoder it encodes the group and splices it into
// out at once; with encoders, it encodes it on a goroutine of its own,
// first splicing the oldest group in flight if encoders are.
func (s *splicer) encode(out io.Writer, group []arrow.RecordBatch, rows int64) error {
	if len(s.pending) > 0 && len(s.pending) >= s.encoders {
		if err := s.spliceOldest(out); err != nil {
			releaseAll(group)
			return err
		}
	}
	g := &encodedGroup{done: make(chan struct{}), bufs: [2]*bytes.Buffer{s.buffer(), s.buffer()}}
	s.pending = append(s.pending, g)
	run := func() {
		defer close(g.done)
		defer releaseAll(group)
		g.meta, g.srcs, g.err = s.enc.encode(group, rows, g.bufs[0], g.bufs[1])
	}
	if s.encoders == 0 {
		run()
		return s.spliceOldest(out)
	}
	go run()
	return nil
}

func (s *splicer) buffer() *bytes.Buffer {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// spliceOldest waits for the oldest group in flight and splices it into
// out.
func (s *splicer) spliceOldest(out io.Writer) error {
	g := s.pending[0]
	s.pending = s.pending[1:]
	<-g.done
	defer func() { s.free = append(s.free, g.bufs[:]...) }()
	if g.err != nil {
		return fmt.Errorf("row group %d: %w", len(s.groups), g.err)
	}
	if err := s.splice(out, g); err != nil {
		return fmt.Errorf("row group %d: %w", len(s.groups), err)
	}
	s.groups = append(s.groups, g.meta)
	return nil
}

// splice copies the pages of g's one row group to out, column by column,
// and moves the offsets in its metadata to where they land.
func (s *splicer) splice(out io.Writer, g *encodedGroup) error {
	if s.pos == 0 {
		if _, err := out.Write(magic); err != nil {
			return err
		}
		s.pos = int64(len(magic))
	}
	if n := len(g.meta.RowGroups); n != 1 {
		return fmt.Errorf("an encoded group of %d row groups, want 1", n)
	}
	if len(s.groups) > math.MaxInt16 {
		return fmt.Errorf("more than %d row groups", math.MaxInt16+1)
	}
	rg := g.meta.RowGroups[0]
	if len(rg.Columns) != len(g.srcs) {
		return fmt.Errorf("%d column chunks, %d sources", len(rg.Columns), len(g.srcs))
	}
	first := s.pos
	for i, cc := range rg.Columns {
		md := cc.MetaData
		// What points into the file from outside a column's pages: none
		// of it is written (no page index, no bloom filter), and is
		// refused rather than left pointing at the wrong bytes.
		if cc.OffsetIndexOffset != nil || cc.ColumnIndexOffset != nil || md.BloomFilterOffset != nil || md.IndexPageOffset != nil {
			return fmt.Errorf("column %d: an index or bloom filter, which splicing does not move", i)
		}
		start := md.DataPageOffset
		if md.DictionaryPageOffset != nil {
			start = min(start, *md.DictionaryPageOffset)
		}
		stop := start + md.TotalCompressedSize
		src := g.srcs[i]
		if start < 0 || md.TotalCompressedSize < 0 || stop > int64(len(src)) {
			return fmt.Errorf("column %d: pages at [%d, %d) of %d bytes", i, start, stop, len(src))
		}
		if _, err := out.Write(src[start:stop]); err != nil {
			return err
		}
		shift := s.pos - start
		md.DataPageOffset += shift
		if md.DictionaryPageOffset != nil {
			at := *md.DictionaryPageOffset + shift
			md.DictionaryPageOffset = &at
		}
		cc.FileOffset += shift
		s.pos += stop - start
	}
	ordinal := int16(len(s.groups))
	rg.FileOffset, rg.Ordinal = &first, &ordinal
	return nil
}

// footerStart returns where the footer of the Parquet file in b begins.
func footerStart(b []byte) (int64, error) {
	n := len(b)
	if n < 12 || !bytes.Equal(b[:4], magic) || !bytes.Equal(b[n-4:], magic) {
		return 0, fmt.Errorf("spliced file of %d bytes is not a Parquet file", n)
	}
	footer := int64(binary.LittleEndian.Uint32(b[n-8:]))
	if footer > int64(n-12) {
		return 0, fmt.Errorf("spliced file of %d bytes has a %d-byte footer", n, footer)
	}
	return int64(n-8) - footer, nil
}

// finish splices the groups in flight and writes the footer: shell's
// metadata (its schema and key-value metadata; shell wrote no row group)
// with the spliced row groups.
func (s *splicer) finish(out io.Writer, shell *pqarrow.FileWriter) error {
	for len(s.pending) > 0 {
		if err := s.spliceOldest(out); err != nil {
			return err
		}
	}
	if s.pos == 0 {
		if _, err := out.Write(magic); err != nil {
			return err
		}
	}
	md, err := shell.FileMetadata()
	if err != nil {
		return err
	}
	md.RowGroups, md.NumRows = md.RowGroups[:0], 0
	for _, g := range s.groups {
		md.RowGroups = append(md.RowGroups, g.RowGroups[0])
		md.NumRows += g.RowGroups[0].NumRows
	}
	n, err := md.WriteTo(out, nil)
	if err != nil {
		return err
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("a footer of %d bytes", n)
	}
	tail := binary.LittleEndian.AppendUint32(nil, uint32(n))
	_, err = out.Write(append(tail, magic...))
	return err
}

// wait waits for the groups in flight, which Abort discards.
func (s *splicer) wait() {
	for _, g := range s.pending {
		<-g.done
	}
	s.pending = nil
}
