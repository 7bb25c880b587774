package serve

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestCheckFindsTheFirstNonFinite puts NaN and ±Inf at every place of
// three chunks, among the finite values nearest them (the largest, the
// smallest subnormal, -0), and wants the first one's index.
func TestCheckFindsTheFirstNonFinite(t *testing.T) {
	finite32 := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 1}
	finite64 := []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1), 1}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, n := range []int{1, 63, 64, 65, 200} {
			for at := -1; at < n; at++ {
				v32, v64 := make([]float32, n), make([]float64, n)
				for i := range n {
					v32[i], v64[i] = finite32[i%len(finite32)], finite64[i%len(finite64)]
				}
				if at >= 0 {
					v32[at], v64[at] = float32(bad), bad
					if at+1 < n { // a later one must not hide the first
						v32[n-1], v64[n-1] = float32(bad), bad
					}
				}
				for name, d := range map[string]any{"FP32": v32, "FP64": v64} {
					i, err := datatypes[name].check(d)
					if i != at || (err == nil) != (at < 0) {
						t.Fatalf("%s, %d values, %v at %d: check = %d, %v", name, n, bad, at, i, err)
					}
				}
			}
		}
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
