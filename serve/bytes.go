package serve

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// bytesType is the protocol's BYTES: variable-length strings, a utf8
// column (a classifier's labels). Raw contents hold each element as a
// 4-byte little-endian length and its bytes, as Triton's do.
type bytesType struct{}

func (bytesType) arrowType() arrow.DataType { return arrow.BinaryTypes.String }

func (bytesType) fromJSON(raw json.RawMessage, shape []int64, n int) (any, error) {
	flat, err := flatten(raw, shape, n)
	if err != nil {
		return nil, err
	}
	var vals []string
	if err := json.Unmarshal(flat, &vals); err != nil {
		return nil, jsonDataError(err)
	}
	return vals, nil
}

func (bytesType) fromContents(c *pb.InferTensorContents) (any, error) {
	vals := make([]string, len(c.BytesContents))
	for i, b := range c.BytesContents {
		vals[i] = string(b)
	}
	return vals, nil
}

// fromRaw reads n length-prefixed elements; the bytes must end with the
// last.
func (bytesType) fromRaw(b []byte, n int) (any, error) {
	vals := make([]string, 0, min(n, len(b)/4))
	for i := range n {
		if len(b) < 4 {
			return nil, fmt.Errorf("raw BYTES: element %d: %d bytes left, a length takes 4", i, len(b))
		}
		size := binary.LittleEndian.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return nil, fmt.Errorf("raw BYTES: element %d: length %d, %d bytes left", i, size, len(b)-4)
		}
		vals = append(vals, string(b[4:4+size]))
		b = b[4+size:]
	}
	if len(b) > 0 {
		return nil, fmt.Errorf("raw BYTES: %d bytes past the %d elements", len(b), n)
	}
	return vals, nil
}

func (bytesType) toContents(data any) *pb.InferTensorContents {
	vals := data.([]string)
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return &pb.InferTensorContents{BytesContents: out}
}

func (bytesType) toRaw(data any) []byte {
	var out []byte
	for _, v := range data.([]string) {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)))
		out = append(out, v...)
	}
	return out
}

func (bytesType) column(data any) arrow.ArrayData {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(data.([]string), nil)
	arr := b.NewArray()
	defer arr.Release()
	d := arr.Data()
	d.Retain()
	return d
}

func (bytesType) values(a arrow.Array, off, n int) (any, error) {
	s, ok := a.(*array.String)
	if !ok {
		return nil, fmt.Errorf("type %s, want utf8", a.DataType())
	}
	vals := make([]string, n)
	for i := range vals {
		vals[i] = s.Value(off + i)
	}
	return vals, nil
}

func (bytesType) check(any) (int, error) { return -1, nil }

// variable reports whether size raw bytes may hold n elements of a
// variable-length datatype (BYTES: at least a length each); fromRaw
// checks them exactly.
func variable(d dtype, size, n int) bool {
	_, ok := d.(bytesType)
	return ok && size >= 4*n
}
