package serve

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/drainpipe/drainpipe/seq"
)

// admits checks what an input declares against what the model takes,
// before its data is decoded. Texts and tokens cost far more than their
// bytes once encoded and run (a one-character text, 4 bytes of JSON,
// makes an encoding of hundreds of bytes), so a request holds at most
// the model's queue bound of texts, and of tokens that bound times the
// model's longest row (what a full queue of the longest rows holds; a
// row's tokens past the longest are cut). Other inputs cost what their
// bytes do, and a request larger than the queue runs alone.
func (m *model) admits(name string, shape []int64) error {
	if len(shape) == 0 || m.sequence == nil {
		return nil // the shape's own check says what is wrong
	}
	rows := shape[0]
	if m.text != nil && (name == TextInput || name == TextPairInput) && rows > int64(m.maxRows) {
		return &Error{Code: CodeTooLarge, Err: fmt.Errorf("input %q: shape %v holds %d texts; model %s takes at most %d a request (its queue bound, --queue-rows)", name, shape, rows, m.name, m.maxRows)}
	}
	if len(shape) != 2 || !m.takesTokens(name) {
		return nil
	}
	most := int64(m.sequence.Planner().Length(math.MaxInt)) * int64(m.maxRows)
	if n, err := elements(shape); err == nil && int64(n) > most {
		return &Error{Code: CodeTooLarge, Err: fmt.Errorf("input %q: shape %v holds more tokens than model %s takes a request, %d (its queue bound, --queue-rows, times its longest row)", name, shape, m.name, most)}
	}
	return nil
}

// takesTokens reports whether name is one of the model's token inputs
// (a list column), or the attention mask that goes with them.
func (m *model) takesTokens(name string) bool {
	if name == seq.AttentionMask {
		return true
	}
	return slices.ContainsFunc(m.input.Fields(), func(f arrow.Field) bool {
		_, isList := f.Type.(*arrow.ListType)
		return isList && f.Name == name
	})
}

// declaredInput is what a gRPC request's input declares on the wire.
type declaredInput struct {
	name     string
	shape    []int64
	contents int64 // elements its contents hold
}

// declaredWire reads a ModelInferRequest's model, version and inputs off
// its wire bytes, without decoding their contents. Bytes that are not a
// message give what was read before them: the decoder says what is wrong.
func declaredWire(b []byte) (model, version string, inputs []declaredInput) {
	eachField(b, func(num protowire.Number, typ protowire.Type, val []byte) error {
		v, n := protowire.ConsumeBytes(val)
		if typ != protowire.BytesType || n < 0 {
			return nil
		}
		switch num {
		case 1:
			model = string(v)
		case 2:
			version = string(v)
		case 5:
			inputs = append(inputs, declaredTensor(v))
		}
		return nil
	})
	return model, version, inputs
}

// declaredTensor reads an input tensor message's name, shape and the
// number of elements of its contents.
func declaredTensor(b []byte) declaredInput {
	var in declaredInput
	eachField(b, func(num protowire.Number, typ protowire.Type, val []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(val)
			in.name = string(v)
		case num == 3 && typ == protowire.BytesType:
			packed, _ := protowire.ConsumeBytes(val)
			for len(packed) > 0 && len(in.shape) <= maxRank {
				d, k := protowire.ConsumeVarint(packed)
				if k < 0 {
					break
				}
				in.shape, packed = append(in.shape, int64(d)), packed[k:]
			}
		case num == 3 && typ == protowire.VarintType:
			d, _ := protowire.ConsumeVarint(val)
			in.shape = append(in.shape, int64(d))
		case num == 5 && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(val)
			in.contents = contentsElements(v)
		}
		return nil
	})
	return in
}

// contentsElements counts the elements an InferTensorContents message
// holds on the wire: a packed field of varints one a final byte, of
// fixed32 or fixed64 one each 4 or 8 bytes; an unpacked one, or a bytes
// element, one a field.
func contentsElements(b []byte) int64 {
	var n int64
	eachField(b, func(num protowire.Number, typ protowire.Type, val []byte) error {
		packed, k := protowire.ConsumeBytes(val)
		switch {
		case typ != protowire.BytesType || num == 8 || k < 0:
			n++
		case num == 6:
			n += int64(len(packed) / 4)
		case num == 7:
			n += int64(len(packed) / 8)
		default:
			for _, c := range packed {
				if c < 0x80 {
					n++
				}
			}
		}
		return nil
	})
	return n
}

// admitWire checks a gRPC request's declared inputs against its model
// before the message is decoded, and that each input's contents hold no
// more elements than its shape: a request for a model not served passes,
// to be answered as not found.
func (s *Server) admitWire(b []byte) error {
	model, version, inputs := declaredWire(b)
	m, err := s.lookup(model, version)
	if err != nil {
		return nil
	}
	for _, in := range inputs {
		if err := m.admits(in.name, in.shape); err != nil {
			return err
		}
		if n, err := elements(in.shape); err == nil && in.contents > int64(n) {
			return invalid(fmt.Errorf("input %q: contents hold %d elements, shape %v holds %d", in.name, in.contents, in.shape, n))
		}
	}
	return nil
}
