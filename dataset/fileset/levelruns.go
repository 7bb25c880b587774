package fileset

import (
	"encoding/binary"
	"math/bits"
)

// The levels of a fixed_size_list column of present rows are the same for
// every row: repetition levels 0 and then width-1 ones, definition levels
// all at the value's. Parquet stores them in its RLE/bit-packed hybrid, as
// runs: rowPattern checks the runs against the pattern, a run of repeats
// at once and a bit-packed group eight levels at once, without expanding
// the levels one by one as arrow-go's decoder does.

// hybridRuns calls rle for each run of repeats (its first level, value
// and length) and packed for each bit-packed run (its first level, its
// bytes and how many levels it holds) of a hybrid stream of count levels
// of bitWidth bits, clipped to count; false if the stream is malformed,
// ends short or a callback says false.
func hybridRuns(data []byte, bitWidth, count int, rle func(at int, v uint64, n int) bool, packed func(at int, b []byte, n int) bool) bool {
	valueBytes := (bitWidth + 7) / 8
	at := 0
	for at < count {
		h, k := binary.Uvarint(data)
		if k <= 0 || h == 0 || h > 1<<40 {
			return false
		}
		data = data[k:]
		if h&1 == 1 { // bit-packed: h>>1 groups of 8 levels
			groups := int(h >> 1)
			size := groups * bitWidth
			if size > len(data) {
				return false
			}
			n := min(groups*8, count-at)
			if !packed(at, data[:size], n) {
				return false
			}
			data, at = data[size:], at+n
			continue
		}
		n := int(min(h>>1, uint64(count-at)))
		if valueBytes > len(data) || valueBytes > 8 {
			return false
		}
		var v uint64
		for i := range valueBytes {
			v |= uint64(data[i]) << (8 * i)
		}
		if !rle(at, v, n) {
			return false
		}
		data = data[valueBytes:]
		at += n
	}
	return true
}

// levelBits is the bit width of levels up to max.
func levelBits(max int16) int { return bits.Len16(uint16(max)) }

// repetitionPattern reports whether count repetition levels (bit width 1,
// a list's) are rows of width levels each: 0, then width-1 ones.
func repetitionPattern(data []byte, count, width int) bool {
	if count%width != 0 {
		return false
	}
	// want[j] is the byte of 8 levels from a level at j mod width.
	want := make([]byte, width)
	for j := range width {
		for b := range 8 {
			if (j+b)%width != 0 {
				want[j] |= 1 << b
			}
		}
	}
	return hybridRuns(data, 1, count, func(at int, v uint64, n int) bool {
		first := at % width
		switch v {
		case 0: // row starts only
			return width == 1 || (n == 1 && first == 0)
		case 1: // inside one row
			return first != 0 && first+n <= width
		}
		return false
	}, func(at int, b []byte, n int) bool {
		for g := 0; g*8 < n; g++ {
			w := want[(at+g*8)%width]
			if left := n - g*8; left < 8 {
				mask := byte(1)<<left - 1
				if b[g]&mask != w&mask {
					return false
				}
			} else if b[g] != w {
				return false
			}
		}
		return true
	})
}

// definitionPattern reports whether count definition levels of bitWidth
// bits all equal v.
func definitionPattern(data []byte, bitWidth, count int, v int16) bool {
	// A group of 8 levels all v is the same bitWidth bytes every time.
	var group [8]byte
	for i := range 8 * bitWidth {
		if v>>(i%bitWidth)&1 == 1 {
			group[i/8] |= 1 << (i % 8)
		}
	}
	return hybridRuns(data, bitWidth, count, func(_ int, got uint64, _ int) bool { return got == uint64(v) },
		func(_ int, b []byte, n int) bool {
			full := n / 8
			for g := range full {
				if string(b[g*bitWidth:(g+1)*bitWidth]) != string(group[:bitWidth]) {
					return false
				}
			}
			for i := full * 8; i < n; i++ { // a last, short group
				got := 0
				for j := range bitWidth {
					bit := i*bitWidth + j
					got |= int(b[bit/8]>>(bit%8)&1) << j
				}
				if got != int(v) {
					return false
				}
			}
			return true
		})
}
