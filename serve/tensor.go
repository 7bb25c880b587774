package serve

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/finite"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// tensor is one named tensor of a request or a response, its elements flat
// in row-major order in a slice of the datatype's Go type.
type tensor struct {
	name     string
	datatype string
	shape    []int64
	data     any
	// ends, for a token tensor of rows of their own lengths, are where
	// each row ends in data; the shape's second dimension is the longest.
	ends []int32
}

// TensorMetadata describes one input or output of a model as the protocol
// does: -1 marks the batch dimension.
type TensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// dtype is what the server knows of one protocol datatype.
type dtype interface {
	arrowType() arrow.DataType
	// fromJSON decodes the n elements of shape from a JSON array, nested
	// or flat.
	fromJSON(raw json.RawMessage, shape []int64, n int) (any, error)
	fromContents(c *pb.InferTensorContents) (any, error)
	fromRaw(b []byte, n int) (any, error)
	toContents(data any) *pb.InferTensorContents
	// toRaw returns data's raw contents, which may share its memory (data
	// is an output's own copy, values').
	toRaw(data any) []byte
	// column makes an Arrow array over data without copying it.
	column(data any) arrow.ArrayData
	// values copies n elements from offset off of an Arrow array.
	values(a arrow.Array, off, n int) (any, error)
	// check reports the first element that no model can take.
	check(data any) (int, error)
}

// datatypes maps the protocol's datatype names to Arrow. FP16 and BF16
// have no Arrow column a drainpipe model reads, so they are refused.
var datatypes = map[string]dtype{
	"BOOL":   boolType{},
	"INT8":   numeric[int8, int32]{arrow.PrimitiveTypes.Int8, intContents},
	"INT16":  numeric[int16, int32]{arrow.PrimitiveTypes.Int16, intContents},
	"INT32":  numeric[int32, int32]{arrow.PrimitiveTypes.Int32, intContents},
	"INT64":  numeric[int64, int64]{arrow.PrimitiveTypes.Int64, int64Contents},
	"UINT8":  numeric[uint8, uint32]{arrow.PrimitiveTypes.Uint8, uintContents},
	"UINT16": numeric[uint16, uint32]{arrow.PrimitiveTypes.Uint16, uintContents},
	"UINT32": numeric[uint32, uint32]{arrow.PrimitiveTypes.Uint32, uintContents},
	"UINT64": numeric[uint64, uint64]{arrow.PrimitiveTypes.Uint64, uint64Contents},
	"FP32":   numeric[float32, float32]{arrow.PrimitiveTypes.Float32, fp32Contents},
	"FP64":   numeric[float64, float64]{arrow.PrimitiveTypes.Float64, fp64Contents},
	"BYTES":  bytesType{},
}

func intContents(c *pb.InferTensorContents) *[]int32     { return &c.IntContents }
func int64Contents(c *pb.InferTensorContents) *[]int64   { return &c.Int64Contents }
func uintContents(c *pb.InferTensorContents) *[]uint32   { return &c.UintContents }
func uint64Contents(c *pb.InferTensorContents) *[]uint64 { return &c.Uint64Contents }
func fp32Contents(c *pb.InferTensorContents) *[]float32  { return &c.Fp32Contents }
func fp64Contents(c *pb.InferTensorContents) *[]float64  { return &c.Fp64Contents }

// datatypeName returns the protocol's name for an Arrow element type.
func datatypeName(t arrow.DataType) (string, bool) {
	for name, d := range datatypes {
		if arrow.TypeEqual(d.arrowType(), t) {
			return name, true
		}
	}
	return "", false
}

// metadata describes an Arrow field as a tensor: a primitive column is
// [-1], a fixed_size_list<T>[k] column [-1, k], a list<T> column (a
// sequence model's token ids) [-1, -1]: a request's rows each have the
// length its shape says.
func metadata(f arrow.Field) (TensorMetadata, error) {
	elem, shape := f.Type, []int64{-1}
	switch l := f.Type.(type) {
	case *arrow.FixedSizeListType:
		elem, shape = l.Elem(), []int64{-1, int64(l.Len())}
	case *arrow.ListType:
		elem, shape = l.Elem(), []int64{-1, -1}
	}
	name, ok := datatypeName(elem)
	if !ok {
		return TensorMetadata{}, fmt.Errorf("column %q: type %s has no tensor datatype", f.Name, f.Type)
	}
	return TensorMetadata{Name: f.Name, Datatype: name, Shape: shape}, nil
}

// elements returns the number of elements of a shape.
func elements(shape []int64) (int, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v: negative dimension", shape)
		}
		if d > 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("shape %v: more than %d elements", shape, math.MaxInt32)
		}
		n *= d
	}
	return int(n), nil
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// numeric is a datatype whose elements are T, carried in the typed
// contents as W (INT8 travels in int_contents, for one).
type numeric[T, W number] struct {
	typ   arrow.DataType
	field func(*pb.InferTensorContents) *[]W
}

func (d numeric[T, W]) arrowType() arrow.DataType { return d.typ }

func (d numeric[T, W]) fromJSON(raw json.RawMessage, shape []int64, n int) (any, error) {
	return decodeJSON[T](raw, shape, n)
}

func (d numeric[T, W]) fromContents(c *pb.InferTensorContents) (any, error) {
	src := *d.field(c)
	vals := make([]T, len(src))
	for i, w := range src {
		vals[i] = T(w)
		if W(vals[i]) != w && !math.IsNaN(float64(w)) {
			return nil, fmt.Errorf("element %d: %v out of range", i, w)
		}
	}
	return vals, nil
}

func (d numeric[T, W]) fromRaw(b []byte, n int) (any, error) {
	vals := make([]T, n)
	if nativeLittleEndian {
		// The protocol's raw contents are little-endian, as the host is:
		// a copy, not a conversion an element.
		if copy(bytesOf(vals), b) != len(b) || len(b) != n*elemSize[T]() {
			return nil, fmt.Errorf("%d raw bytes for %d elements of %d bytes", len(b), n, elemSize[T]())
		}
		return vals, nil
	}
	if _, err := binary.Decode(b, binary.LittleEndian, vals); err != nil {
		return nil, err
	}
	return vals, nil
}

func (d numeric[T, W]) toContents(data any) *pb.InferTensorContents {
	vals := data.([]T)
	out := make([]W, len(vals))
	for i, v := range vals {
		out[i] = W(v)
	}
	c := &pb.InferTensorContents{}
	*d.field(c) = out
	return c
}

func (d numeric[T, W]) toRaw(data any) []byte {
	vals := data.([]T)
	if nativeLittleEndian {
		return bytesOf(vals)
	}
	b, _ := binary.Append(make([]byte, 0, len(vals)*elemSize[T]()), binary.LittleEndian, vals)
	return b
}

func (d numeric[T, W]) column(data any) arrow.ArrayData {
	vals := data.([]T)
	return array.NewData(d.typ, len(vals), []*memory.Buffer{nil, memory.NewBufferBytes(bytesOf(vals))}, nil, 0, 0)
}

func (d numeric[T, W]) values(a arrow.Array, off, n int) (any, error) {
	if !arrow.TypeEqual(a.DataType(), d.typ) {
		return nil, fmt.Errorf("type %s, want %s", a.DataType(), d.typ)
	}
	data := a.Data()
	buf := data.Buffers()[1].Bytes()
	all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/elemSize[T]())
	start := data.Offset() + off
	return append([]T(nil), all[start:start+n]...), nil
}

func (d numeric[T, W]) check(data any) (int, error) {
	i := -1
	switch vals := data.(type) {
	case []float32:
		i = finite.Index32(vals)
	case []float64:
		i = finite.Index64(vals)
	default:
		return -1, nil // every integer is a value a model can take
	}
	if i >= 0 {
		return i, fmt.Errorf("%v is not finite", data.([]T)[i])
	}
	return -1, nil
}

// nativeLittleEndian reports whether the host stores numbers as the
// protocol's raw contents do.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// elemSize returns the bytes of one T.
func elemSize[T number]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// bytesOf views vals as their bytes, in the host's order.
func bytesOf[T number](vals []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)*elemSize[T]())
}

// boolType is BOOL: one byte per element raw, bits in Arrow.
type boolType struct{}

func (boolType) arrowType() arrow.DataType { return arrow.FixedWidthTypes.Boolean }

func (boolType) fromJSON(raw json.RawMessage, shape []int64, n int) (any, error) {
	return decodeJSON[bool](raw, shape, n)
}

func (boolType) fromContents(c *pb.InferTensorContents) (any, error) { return c.BoolContents, nil }

func (boolType) fromRaw(b []byte, n int) (any, error) {
	vals := make([]bool, n)
	for i, v := range b[:n] {
		if v > 1 {
			return nil, fmt.Errorf("byte %d: %d is not a bool (0 or 1)", i, v)
		}
		vals[i] = v == 1
	}
	return vals, nil
}

func (boolType) toContents(data any) *pb.InferTensorContents {
	return &pb.InferTensorContents{BoolContents: data.([]bool)}
}

func (boolType) toRaw(data any) []byte {
	vals := data.([]bool)
	b := make([]byte, len(vals))
	for i, v := range vals {
		if v {
			b[i] = 1
		}
	}
	return b
}

func (boolType) column(data any) arrow.ArrayData {
	vals := data.([]bool)
	bld := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(vals, nil)
	arr := bld.NewArray()
	defer arr.Release()
	d := arr.Data()
	d.Retain()
	return d
}

func (boolType) values(a arrow.Array, off, n int) (any, error) {
	b, ok := a.(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("type %s, want bool", a.DataType())
	}
	vals := make([]bool, n)
	for i := range vals {
		vals[i] = b.Value(off + i)
	}
	return vals, nil
}

func (boolType) check(any) (int, error) { return -1, nil }

// rawSize returns the bytes per element of a datatype's raw contents;
// for BYTES, whose elements vary, the least (a length).
func rawSize(d dtype) int {
	switch d.(type) {
	case boolType:
		return 1
	case bytesType:
		return 4
	}
	return d.arrowType().(arrow.FixedWidthDataType).Bytes()
}
