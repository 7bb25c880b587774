package fileset

import (
	"bytes"
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
	return newRowRepetitions(width).match(data, count)
}

// rowRepetitions checks repetition levels against rows of width levels.
// Made once for a width, it checks a page's levels a slice of bytes at
// once, against the pattern's bytes laid out beforehand: byte by byte,
// this check cost as much as decompressing the page.
type rowRepetitions struct {
	width int
	// stream is the pattern's levels from a row's start, one bit each:
	// period bytes, then tileBytes more. Nil for rows wider than
	// maxTiledWidth, which are checked byte by byte.
	stream []byte
	period int    // bytes after which the pattern's bytes repeat
	step   int    // 8/gcd(width, 8): a byte's levels, in units of the gcd
	inv    int    // the inverse of step modulo period
	narrow []byte // for rows of fewer than 8 levels: the byte from each level
	// runs is tileRows rows as two runs of repeats each: a zero, then
	// width-1 ones, the way writers encode wide rows (the sink does from
	// 16 values a row).
	runs    []byte
	rowRuns int // the bytes of a row's runs
}

const (
	tileRows      = 64      // rows of runs compared at once
	tileBytes     = 64      // bytes of bit-packed levels compared at once
	maxTiledWidth = 1 << 16 // the widest rows whose pattern is laid out
)

func newRowRepetitions(width int) *rowRepetitions {
	r := &rowRepetitions{width: width}
	if width < 8 {
		r.narrow = make([]byte, width)
		for j := range width {
			for i := range 8 {
				if (j+i)%width != 0 {
					r.narrow[j] |= 1 << i
				}
			}
		}
	}
	if width <= maxTiledWidth {
		d := gcd(width, 8)
		r.period, r.step = width/d, 8/d
		bits := 8 * (r.period + tileBytes)
		r.stream = bytes.Repeat([]byte{0xff}, bits/8)
		for t := 0; t < bits; t += width {
			r.stream[t/8] &^= 1 << (t % 8)
		}
		for r.inv = 0; r.period > 1 && r.step*r.inv%r.period != 1; r.inv++ {
		}
	}
	if width > 1 {
		row := binary.AppendUvarint([]byte{2, 0}, uint64(width-1)<<1)
		row = append(row, 1)
		r.runs, r.rowRuns = bytes.Repeat(row, tileRows), len(row)
	}
	return r
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// from returns the byte of r.stream whose first level is at j within a
// row, or -1 if none is.
func (r *rowRepetitions) from(j int) int {
	if r.stream == nil {
		return -1
	}
	d := 8 / r.step
	if j%d != 0 {
		return -1
	}
	// 8g ≡ j (mod width) is step·g ≡ j/d (mod period).
	return j / d * r.inv % r.period
}

// byteAt is the byte of 8 levels from the level at j within a row.
func (r *rowRepetitions) byteAt(j int) byte {
	if r.narrow != nil {
		return r.narrow[j]
	}
	// A row of 8 levels or more: at most one of the 8 starts a row.
	b := byte(0xff)
	if j == 0 {
		b &^= 1
	} else if k := r.width - j; k < 8 {
		b &^= 1 << k
	}
	return b
}

// matchRuns reports whether data is rows of levels written as r.runs
// are: the same bytes, so the same levels.
func (r *rowRepetitions) matchRuns(data []byte, rows int) bool {
	if r.rowRuns == 0 || len(data) != rows*r.rowRuns {
		return false
	}
	for len(data) > 0 {
		n := min(len(data), len(r.runs))
		if string(data[:n]) != string(r.runs[:n]) {
			return false
		}
		data = data[n:]
	}
	return true
}

// match reports whether count levels in data are rows of r.width levels.
func (r *rowRepetitions) match(data []byte, count int) bool {
	width := r.width
	if count%width != 0 {
		return false
	}
	if r.matchRuns(data, count/width) {
		return true
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
		full := n / 8
		j := at % width
		if g := r.from(j); g >= 0 {
			for k := 0; k < full; {
				c := min(tileBytes, full-k)
				if string(b[k:k+c]) != string(r.stream[g:g+c]) {
					return false
				}
				k += c
				g = (g + c) % r.period
			}
			j = (j + 8*full) % width
		} else {
			// Rows too wide to lay out, or a run starting where no byte
			// of the pattern does (after a run of repeats of odd length):
			// byte by byte.
			for _, got := range b[:full] {
				if got != r.byteAt(j) {
					return false
				}
				j = (j + 8) % width
			}
		}
		if left := n - full*8; left > 0 {
			mask := byte(1)<<left - 1
			return b[full]&mask == r.byteAt(j)&mask
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
