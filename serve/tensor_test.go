package serve

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestCheckNamesTheFirstNonFinite: a float tensor's first NaN or ±Inf is
// refused with its index, an integer tensor is never refused.
func TestCheckNamesTheFirstNonFinite(t *testing.T) {
	for name, data := range map[string]any{
		"FP32": []float32{1, 2, float32(math.Inf(-1)), float32(math.NaN())},
		"FP64": []float64{1, 2, math.NaN(), math.Inf(1)},
	} {
		i, err := datatypes[name].check(data)
		if i != 2 || err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("%s: check = %d, %v; want 2 and not finite", name, i, err)
		}
	}
	if i, err := datatypes["INT64"].check([]int64{math.MaxInt64}); i != -1 || err != nil {
		t.Errorf("INT64: check = %d, %v", i, err)
	}
}

// TestRawContentsAreLittleEndian checks the raw contents of every numeric
// datatype against encoding/binary's little-endian form, both ways.
func TestRawContentsAreLittleEndian(t *testing.T) {
	for name, vals := range map[string]any{
		"INT8": []int8{-128, -1, 0, 127}, "INT16": []int16{-32768, 1, 32767}, "INT32": []int32{math.MinInt32, -2, math.MaxInt32},
		"INT64": []int64{math.MinInt64, 3, math.MaxInt64}, "UINT8": []uint8{0, 255}, "UINT16": []uint16{0, 65535},
		"UINT32": []uint32{1, math.MaxUint32}, "UINT64": []uint64{1, math.MaxUint64},
		"FP32": []float32{-1.5, math.SmallestNonzeroFloat32, math.MaxFloat32}, "FP64": []float64{-1.5, math.SmallestNonzeroFloat64, math.MaxFloat64},
	} {
		d := datatypes[name]
		want, err := binary.Append(nil, binary.LittleEndian, vals)
		if err != nil {
			t.Fatal(err)
		}
		raw := d.toRaw(vals)
		if !bytes.Equal(raw, want) {
			t.Errorf("%s: toRaw = %x, want %x", name, raw, want)
		}
		n := len(want) / rawSize(d)
		back, err := d.fromRaw(want, n)
		if err != nil {
			t.Fatalf("%s: fromRaw: %v", name, err)
		}
		if again := d.toRaw(back); !bytes.Equal(again, want) {
			t.Errorf("%s: fromRaw then toRaw = %x, want %x", name, again, want)
		}
		if _, err := d.fromRaw(want[:len(want)-1], n); err == nil {
			t.Errorf("%s: fromRaw of a byte short: no error", name)
		}
	}
}
