package hfmodel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/float16"
)

// ErrSafetensors reports a .safetensors file that breaks the format.
var ErrSafetensors = errors.New("hfmodel: not a valid safetensors file")

// maxWeights bounds the weights file of a module after pooling (a
// Dense of 4096 × 4096 floats is 64 MiB).
const maxWeights = 1 << 30

// tensor is one tensor of a safetensors file, as float32.
type tensor struct {
	shape  []int
	values []float32
}

// readSafetensors reads every tensor of a safetensors file: an 8-byte
// little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the bytes. Every range is checked
// against the shape and the file; F32, F64, F16 and BF16 are read.
func readSafetensors(path string) (map[string]tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxWeights {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d a module's weights may hold", ErrSafetensors, path, st.Size(), maxWeights)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSafetensors, path, fmt.Sprintf(format, args...))
	}
	if len(data) < 8 {
		return nil, bad("%d bytes, shorter than the header's length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, bad("a header of %d bytes in a file of %d", n, len(data))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		return nil, bad("header: %v", err)
	}
	body := data[8+n:]
	out := map[string]tensor{}
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var h struct {
			DType   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, bad("tensor %q: %v", name, err)
		}
		size := map[string]int{"F32": 4, "F64": 8, "F16": 2, "BF16": 2}[h.DType]
		if size == 0 {
			return nil, bad("tensor %q: dtype %q (F32, F64, F16 and BF16 are read)", name, h.DType)
		}
		count := 1
		for _, d := range h.Shape {
			if d < 0 || (d > 0 && count > maxWeights/d) {
				return nil, bad("tensor %q: shape %v", name, h.Shape)
			}
			count *= d
		}
		if len(h.Offsets) != 2 || h.Offsets[0] > h.Offsets[1] || h.Offsets[1] > uint64(len(body)) ||
			h.Offsets[1]-h.Offsets[0] != uint64(count*size) {
			return nil, bad("tensor %q: bytes %v for %d values of %s in %d bytes", name, h.Offsets, count, h.DType, len(body))
		}
		b := body[h.Offsets[0]:h.Offsets[1]]
		vals := make([]float32, count)
		for i := range vals {
			switch h.DType {
			case "F32":
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			case "F64":
				vals[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
			case "F16":
				vals[i] = float16.FromBits(binary.LittleEndian.Uint16(b[2*i:])).Float32()
			case "BF16":
				vals[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
			}
		}
		out[name] = tensor{shape: slices.Clone(h.Shape), values: vals}
	}
	return out, nil
}
