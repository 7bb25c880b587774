package serve

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Bounds on what a request may declare, checked before what it declares
// is allocated: decoded, a message of empty inputs costs a hundred times
// its bytes (a 16 MB body of `{}` inputs, 1.9 GB), so the bytes alone
// bound nothing.
const (
	maxTensors    = 256 // inputs, outputs or raw contents of a request
	maxParameters = 64  // parameters of a request, an input or an output
	maxRank       = 32  // dimensions of a tensor's shape
)

// errDeclared reports a request that declares more than the bounds allow.
var errDeclared = errors.New("the request declares more than the server takes")

// overBound is errDeclared for one kind of thing.
func overBound(what string, limit int) error {
	return fmt.Errorf("%w: more than %d %s", errDeclared, limit, what)
}

// checkInferWire checks a ModelInferRequest's wire bytes against the
// bounds, without decoding them. Bytes that are not a message pass: the
// decoder says what is wrong with them.
func checkInferWire(b []byte) error {
	counts := map[protowire.Number]int{}
	return eachField(b, func(num protowire.Number, typ protowire.Type, val []byte) error {
		counts[num]++
		switch num {
		case 4: // parameters
			if counts[num] > maxParameters {
				return overBound("parameters", maxParameters)
			}
		case 5: // inputs
			if counts[num] > maxTensors {
				return overBound("inputs", maxTensors)
			}
			if typ == protowire.BytesType {
				if err := checkTensorWire(val, 3, 4); err != nil {
					return fmt.Errorf("input %d: %w", counts[num]-1, err)
				}
			}
		case 6: // outputs
			if counts[num] > maxTensors {
				return overBound("outputs", maxTensors)
			}
			if typ == protowire.BytesType {
				if err := checkTensorWire(val, 0, 2); err != nil {
					return fmt.Errorf("output %d: %w", counts[num]-1, err)
				}
			}
		case 7: // raw_input_contents
			if counts[num] > maxTensors {
				return overBound("raw input contents", maxTensors)
			}
		}
		return nil
	})
}

// checkTensorWire checks a tensor message's shape (field shape, packed or
// not; 0: none) and parameters (field params).
func checkTensorWire(b []byte, shape, params protowire.Number) error {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil
	}
	dims, nparams := 0, 0
	return eachField(v, func(num protowire.Number, typ protowire.Type, val []byte) error {
		switch {
		case num == shape && shape != 0 && typ == protowire.BytesType:
			packed, _ := protowire.ConsumeBytes(val)
			for len(packed) > 0 && dims <= maxRank {
				_, k := protowire.ConsumeVarint(packed)
				if k < 0 {
					break
				}
				packed, dims = packed[k:], dims+1
			}
		case num == shape && shape != 0:
			dims++
		case num == params:
			nparams++
		}
		if dims > maxRank {
			return overBound("dimensions", maxRank)
		}
		if nparams > maxParameters {
			return overBound("parameters", maxParameters)
		}
		return nil
	})
}

// eachField calls fn with each top-level field of a message (its value
// as the wire holds it, tag excluded), stopping at the first error, or
// at bytes that are not a field.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, val []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil
		}
		if err := fn(num, typ, b[:m]); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}
