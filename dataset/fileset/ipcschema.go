package fileset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Arrow's IPC reader sizes Go slices by counts it reads from a schema's
// flatbuffer (a field's children) before checking them: a damaged count
// asks the runtime for gigabytes, a fatal error that no recover catches.
// checkIPCSchema walks the schema first and refuses any vector that does
// not fit in the bytes it was read from. Offsets are those of Arrow's
// Schema.fbs, Message.fbs and File.fbs.

// errFlatbuffer reports IPC metadata whose vectors overrun their buffer.
var errFlatbuffer = errors.New("IPC metadata is damaged")

const maxSchemaDepth = 64

// vtable slots, as flatc numbers them: 4 + 2·field index.
func slot(i int) flatbuffers.VOffsetT { return flatbuffers.VOffsetT(4 + 2*i) }

// checkVector checks that the vector in table slot i, of elem-byte
// elements, lies inside the buffer, and returns its start and length.
func checkVector(t *flatbuffers.Table, i, elem int) (start flatbuffers.UOffsetT, n int, err error) {
	o := flatbuffers.UOffsetT(t.Offset(slot(i)))
	if o == 0 {
		return 0, 0, nil
	}
	start = t.Vector(o)
	n = t.VectorLen(o)
	if int64(start)+int64(n)*int64(elem) > int64(len(t.Bytes)) {
		return 0, 0, fmt.Errorf("%w: a vector of %d elements overruns its %d-byte buffer", errFlatbuffer, n, len(t.Bytes))
	}
	return start, n, nil
}

// table returns the table at slot i of t, if present.
func table(t *flatbuffers.Table, i int) (flatbuffers.Table, bool) {
	o := flatbuffers.UOffsetT(t.Offset(slot(i)))
	if o == 0 {
		return flatbuffers.Table{}, false
	}
	return flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(o + t.Pos)}, true
}

// element returns table j of the vector of tables starting at start.
func element(t *flatbuffers.Table, start flatbuffers.UOffsetT, j int) flatbuffers.Table {
	at := start + flatbuffers.UOffsetT(j)*4
	return flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(at)}
}

func checkKeyValues(t *flatbuffers.Table, i int) error {
	start, n, err := checkVector(t, i, 4)
	for j := 0; err == nil && j < n; j++ {
		kv := element(t, start, j)
		if _, _, err = checkVector(&kv, 0, 1); err == nil {
			_, _, err = checkVector(&kv, 1, 1)
		}
	}
	return err
}

func checkField(f *flatbuffers.Table, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("%w: fields nested more than %d deep", errFlatbuffer, maxSchemaDepth)
	}
	if _, _, err := checkVector(f, 0, 1); err != nil { // name
		return err
	}
	if err := checkKeyValues(f, 6); err != nil {
		return err
	}
	start, n, err := checkVector(f, 5, 4) // children
	for j := 0; err == nil && j < n; j++ {
		child := element(f, start, j)
		err = checkField(&child, depth+1)
	}
	return err
}

func checkSchema(s *flatbuffers.Table) error {
	if err := checkKeyValues(s, 2); err != nil {
		return err
	}
	if _, _, err := checkVector(s, 3, 8); err != nil { // features
		return err
	}
	start, n, err := checkVector(s, 1, 4) // fields
	for j := 0; err == nil && j < n; j++ {
		f := element(s, start, j)
		err = checkField(&f, 0)
	}
	return err
}

// checkSchemaMessage checks an IPC stream's first message, if it is a
// schema: 0xFFFFFFFF, an int32 length, then a Message flatbuffer.
func checkSchemaMessage(stream []byte) (err error) {
	defer recoverFlatbuffer(&err)
	if len(stream) < 8 {
		return nil // the reader reports a short stream
	}
	off := 0
	if binary.LittleEndian.Uint32(stream) == 0xFFFFFFFF {
		off = 4
	}
	n := int(int32(binary.LittleEndian.Uint32(stream[off:])))
	if n <= 0 || off+4+n > len(stream) {
		return nil // the reader's own bounds catch it
	}
	buf := stream[off+4 : off+4+n]
	msg := flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}
	const schemaHeader = 1
	if typ := msg.GetUint8Slot(slot(1), 0); typ != schemaHeader {
		return nil
	}
	s, ok := table(&msg, 2)
	if !ok {
		return nil
	}
	return checkSchema(&s)
}

// checkFileFooter checks the schema in an IPC file's footer (the file ends
// with the footer, its int32 length and "ARROW1").
func checkFileFooter(file []byte) (err error) {
	defer recoverFlatbuffer(&err)
	const magic = "ARROW1"
	if len(file) < 10 || string(file[len(file)-6:]) != magic {
		return nil // the reader reports it
	}
	n := int(int32(binary.LittleEndian.Uint32(file[len(file)-10:])))
	if n <= 0 || n > len(file)-10 {
		return nil
	}
	buf := file[len(file)-10-n : len(file)-10]
	footer := flatbuffers.Table{Bytes: buf, Pos: flatbuffers.GetUOffsetT(buf)}
	if _, _, err := checkVector(&footer, 2, 24); err != nil { // dictionaries
		return err
	}
	if _, _, err := checkVector(&footer, 3, 24); err != nil { // record batches
		return err
	}
	s, ok := table(&footer, 1)
	if !ok {
		return nil
	}
	return checkSchema(&s)
}

// recoverFlatbuffer turns an out-of-range read while walking damaged
// metadata into an error.
func recoverFlatbuffer(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: %v", errFlatbuffer, p)
	}
}

// checkIPCMetadata checks the schema of an IPC file (in its footer) or
// stream (its first message) before Arrow's reader decodes it.
func checkIPCMetadata(f io.ReaderAt, size int64, isFile bool) error {
	read := func(off, n int64) []byte {
		if off < 0 || n < 0 || off+n > size {
			return nil
		}
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil
		}
		return b
	}
	if isFile {
		tail := read(size-10, 10)
		if tail == nil {
			return nil
		}
		n := int64(int32(binary.LittleEndian.Uint32(tail)))
		footer := read(size-10-n, n)
		if footer == nil {
			return nil // the reader reports the bad length
		}
		return checkFileFooter(append(footer, tail...))
	}
	head := read(0, 8)
	if head == nil {
		return nil
	}
	off := int64(0)
	if binary.LittleEndian.Uint32(head) == 0xFFFFFFFF {
		off = 4
	}
	n := int64(int32(binary.LittleEndian.Uint32(head[off:])))
	msg := read(0, off+4+n)
	if msg == nil {
		return nil
	}
	return checkSchemaMessage(msg)
}
