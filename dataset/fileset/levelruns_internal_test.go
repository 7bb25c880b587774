package fileset

import (
	"encoding/binary"
	"testing"
)

// expandHybrid decodes count levels of an RLE/bit-packed hybrid stream one
// by one, the plain way: the reference the run checks are held to. It
// refuses what hybridRuns refuses (a run of no levels, a stream ending
// short).
func expandHybrid(data []byte, bitWidth, count int) ([]int, bool) {
	var out []int
	for len(out) < count {
		h, k := binary.Uvarint(data)
		if k <= 0 || h == 0 || h > 1<<40 {
			return nil, false
		}
		data = data[k:]
		if h&1 == 1 {
			n := int(h>>1) * 8
			if n/8*bitWidth > len(data) {
				return nil, false
			}
			for i := 0; i < n && len(out) < count; i++ {
				v := 0
				for j := range bitWidth {
					bit := i*bitWidth + j
					v |= int(data[bit/8]>>(bit%8)&1) << j
				}
				out = append(out, v)
			}
			data = data[n/8*bitWidth:]
			continue
		}
		size := (bitWidth + 7) / 8
		if size > len(data) {
			return nil, false
		}
		v := 0
		for i := range size {
			v |= int(data[i]) << (8 * i)
		}
		for i := uint64(0); i < h>>1 && len(out) < count; i++ {
			out = append(out, v)
		}
		data = data[size:]
	}
	return out, true
}

// FuzzLevelPatterns holds the run checks of levels to the plain decoding:
// a stream passes repetitionPattern exactly when its levels, decoded one
// by one, are rows of width levels (0, then ones), and definitionPattern
// exactly when they all equal v.
func FuzzLevelPatterns(f *testing.F) {
	// Rows of 4: a bit-packed group (0,1,1,1,0,1,1,1), then a run of 4
	// zeros-and-ones as arrow-go writes them; definition levels 3 in a
	// run of 8.
	f.Add([]byte{0x03, 0xee}, uint16(8), uint8(4), uint8(2), uint8(3))
	f.Add([]byte{0x10, 0x03}, uint16(8), uint8(4), uint8(2), uint8(3))
	f.Add([]byte{0x03, 0x01, 0x70, 0x01}, uint16(64), uint8(64), uint8(1), uint8(1))
	f.Add([]byte{0x05, 0xfe, 0x03}, uint16(10), uint8(10), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, count uint16, width, bitWidth, v uint8) {
		if count == 0 || width == 0 || bitWidth == 0 || bitWidth > 8 || int(v) >= 1<<bitWidth {
			return
		}
		n, k := int(count), int(width)
		reps, ok := expandHybrid(data, 1, n)
		want := ok && n%k == 0
		for i := 0; want && i < n; i++ {
			want = reps[i] == map[bool]int{true: 0, false: 1}[i%k == 0]
		}
		if got := repetitionPattern(data, n, k); got != want {
			t.Fatalf("repetitionPattern(%x, %d levels, width %d) = %t, the plain decoding says %t (%v)", data, n, k, got, want, reps)
		}
		defs, ok := expandHybrid(data, int(bitWidth), n)
		want = ok
		for i := 0; want && i < n; i++ {
			want = defs[i] == int(v)
		}
		if got := definitionPattern(data, int(bitWidth), n, int16(v)); got != want {
			t.Fatalf("definitionPattern(%x, %d levels, %d bits, %d) = %t, the plain decoding says %t (%v)", data, n, bitWidth, v, got, want, defs)
		}
	})
}
