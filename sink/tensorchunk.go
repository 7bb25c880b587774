package sink

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/klauspost/compress/s2"
)

// A tensor column's chunk, encoded straight from the Arrow buffers: the
// columns a job writes most (predictions, embeddings) are fixed-size
// lists of floats with no null, whose levels are the same for every row.
// arrow-go's writer expands them into two levels a value and encodes
// those one by one, a third of a write's CPU; here each page's levels are
// written as runs, its values copied. arrow-go's page writer still
// writes the page headers and the chunk's metadata.

// tensorColumn is a top-level fixed_size_list column the sink encodes
// itself when a row group's rows of it hold no null.
type tensorColumn struct {
	width, size int // values a row, bytes a value
	perPage     int // rows a page
	fullRep     []byte
	leaf        *schema.Column
	compression compress.Compression
	level       int
	compress    func(dst, src []byte) []byte // nil: uncompressed
}

// tensorColumnOf returns the tensor column field f of the file is, or nil
// where arrow-go encodes it: a fixed_size_list of 4- or 8-byte floats or
// integers at the top level, one leaf, written as arrow-go would write
// it with props (data pages v1, PLAIN, no dictionary, statistics, page
// index, bloom filter or encryption), on a little-endian machine
// (Parquet's byte order is Arrow's).
func tensorColumnOf(f arrow.Field, leaves []*schema.Column, props *parquet.WriterProperties) *tensorColumn {
	t, ok := f.Type.(*arrow.FixedSizeListType)
	if !ok || len(leaves) != 1 || t.Len() < 1 {
		return nil
	}
	size := 0
	switch t.Elem().ID() {
	case arrow.FLOAT32, arrow.INT32:
		size = 4
	case arrow.FLOAT64, arrow.INT64:
		size = 8
	default:
		return nil
	}
	leaf := leaves[0]
	path := leaf.Path()
	if int64(t.Len())*int64(size) > 1<<30 || leaf.MaxRepetitionLevel() != 1 ||
		props.DataPageVersion() != parquet.DataPageV1 || props.EncodingFor(path) != parquet.Encodings.Plain ||
		props.DictionaryEnabledFor(path) || props.StatisticsEnabledFor(path) || props.PageIndexEnabledFor(path) ||
		props.BloomFilterEnabledFor(path) || props.FileEncryptionProperties() != nil ||
		binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil
	}
	c := &tensorColumn{width: int(t.Len()), size: size, leaf: leaf, compression: props.CompressionFor(path), level: props.CompressionLevelFor(path)}
	switch c.compression {
	case compress.Codecs.Uncompressed:
	case compress.Codecs.Snappy:
		// arrow-go's Snappy is S2's "better" Snappy, which finds little
		// more in floats at several times the CPU; the plain encoder's
		// blocks are Snappy's too.
		c.compress = s2.EncodeSnappy
	default:
		codec, err := compress.GetCodec(c.compression)
		if err != nil {
			return nil
		}
		c.compress = func(dst, src []byte) []byte {
			return codec.EncodeLevel(dst[:cap(dst)], src, c.level)
		}
	}
	// Every page but a chunk's last has perPage rows: their repetition
	// levels are the same.
	c.perPage = max(1, dataPageBytes/(c.width*c.size))
	c.fullRep = repLevels(nil, c.width, c.perPage)
	return c
}

// holdsNoNull reports whether the column's arrays, and their values,
// hold no null: then every value's levels are the same.
func holdsNoNull(arrs []arrow.Array) bool {
	for _, a := range arrs {
		l, ok := a.(*array.FixedSizeList)
		if !ok || l.NullN() != 0 || l.ListValues().NullN() != 0 {
			return false
		}
	}
	return true
}

// tellBuffer is the page writer's sink: a buffer that knows its length.
type tellBuffer struct{ *bytes.Buffer }

func (b tellBuffer) Tell() int64 { return int64(b.Len()) }

// writeChunk appends the column chunk of arrs, rows of the column in
// order with no null, to out, and finishes its metadata in meta: pages of
// about dataPageBytes, cut at rows.
func (c *tensorColumn) writeChunk(out *bytes.Buffer, meta *metadata.ColumnChunkMetaDataBuilder, ordinal int16, arrs []arrow.Array, mem memory.Allocator) error {
	pager, err := file.NewPageWriter(tellBuffer{out}, c.compression, c.level, meta, 0, ordinal, mem, false, nil, nil)
	if err != nil {
		return err
	}
	rowBytes := c.width * c.size
	left := 0
	for _, a := range arrs {
		left += a.Len()
	}
	var page, packed []byte
	at, off := 0, 0 // the array and row the next page starts at
	for left > 0 {
		rows := min(c.perPage, left)
		left -= rows
		if rows == c.perPage {
			page = append(page[:0], c.fullRep...)
		} else {
			page = repLevels(page[:0], c.width, rows)
		}
		page = defLevels(page, rows*c.width, int(c.leaf.MaxDefinitionLevel()))
		for need := rows; need > 0; {
			l := arrs[at].(*array.FixedSizeList)
			n := min(need, l.Len()-off)
			values := l.ListValues().Data()
			raw := values.Buffers()[1].Bytes()
			from := (values.Offset() + (l.Offset()+off)*c.width) * c.size
			page = append(page, raw[from:from+n*rowBytes]...)
			need, off = need-n, off+n
			if off == l.Len() {
				at, off = at+1, 0
			}
		}
		data := page
		if c.compress != nil {
			packed = c.compress(packed, page)
			data = packed
		}
		dp := file.NewDataPageV1(memory.NewBufferBytes(data), int32(rows*c.width), parquet.Encodings.Plain,
			parquet.Encodings.RLE, parquet.Encodings.RLE, int32(len(page)))
		if _, err := pager.WriteDataPage(dp); err != nil {
			return fmt.Errorf("column %q: %w", c.leaf.Path(), err)
		}
	}
	return pager.Close(false, false)
}

// repLevels starts a page of rows rows of width values with their
// repetition levels (each row's first value 0, the others 1), as the
// RLE/bit-packed hybrid after its 4-byte length.
func repLevels(page []byte, width, rows int) []byte {
	at := len(page)
	page = append(page, 0, 0, 0, 0)
	if width >= 16 {
		// A run of one 0 and a run of width-1 ones a row.
		row := binary.AppendUvarint([]byte{1 << 1, 0}, uint64(width-1)<<1)
		row = append(row, 1)
		for range rows {
			page = append(page, row...)
		}
	} else {
		// Bit-packed, 8 values a byte from the low bit, in runs of at most
		// 63 bytes (a one-byte header), the last byte's spare bits 0.
		n := rows * width
		groups := (n + 7) / 8
		for g := 0; g < groups; g++ {
			if g%63 == 0 {
				page = append(page, byte(min(63, groups-g)<<1|1))
			}
			var b byte
			for bit := range 8 {
				if i := 8*g + bit; i < n && i%width != 0 {
					b |= 1 << bit
				}
			}
			page = append(page, b)
		}
	}
	binary.LittleEndian.PutUint32(page[at:], uint32(len(page)-at-4))
	return page
}

// defLevels appends n definition levels of maxDef, a value present at
// every level, as one RLE run after its 4-byte length.
func defLevels(page []byte, n, maxDef int) []byte {
	var run []byte
	run = binary.AppendUvarint(run, uint64(n)<<1)
	for i := range (bits.Len(uint(maxDef)) + 7) / 8 {
		run = append(run, byte(maxDef>>(8*i))) // little-endian
	}
	page = binary.LittleEndian.AppendUint32(page, uint32(len(run)))
	return append(page, run...)
}
