package fileset

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
	// Pages of runs longer than the bytes compared at once, rows of widths
	// that are and are not multiples of 8; one behind an odd run of
	// repeats, so its bytes start mid-pattern.
	f.Add(bitPackedRows(64, 0, 4096, 63), uint16(4096), uint8(64), uint8(1), uint8(1))
	f.Add(bitPackedRows(10, 0, 4000, 200), uint16(4000), uint8(10), uint8(1), uint8(1))
	f.Add(bitPackedRows(3, 0, 3000, 63), uint16(3000), uint8(3), uint8(1), uint8(1))
	f.Add(runRows(100, 70), uint16(7000), uint8(100), uint8(1), uint8(1))
	f.Add(append(startedRow(3), bitPackedRows(64, 3, 4093, 63)...), uint16(4096), uint8(64), uint8(1), uint8(1))
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

// bitPackedRows is count repetition levels of rows of width, from the
// level at phase within a row on, bit-packed in runs of up to run groups
// of 8 (63 as arrow-go and the sink write them).
func bitPackedRows(width, phase, count, run int) []byte {
	var data []byte
	for at := 0; at < count; at += run * 8 {
		groups := min(run, (count-at+7)/8)
		data = binary.AppendUvarint(data, uint64(groups<<1|1))
		for g := range groups {
			var b byte
			for i := range 8 {
				if (phase+at+8*g+i)%width != 0 {
					b |= 1 << i
				}
			}
			data = append(data, b)
		}
	}
	return data
}

// startedRow is the levels of a row's first k levels, as runs of
// repeats: a zero, then k-1 ones.
func startedRow(k int) []byte {
	data := []byte{0x02, 0x00}
	if k > 1 {
		data = append(data, byte((k-1)<<1), 0x01)
	}
	return data
}

// runRows is the repetition levels of rows of width as runs of repeats,
// two a row, as the sink writes rows of 16 values and more.
func runRows(width, rows int) []byte {
	var data []byte
	for range rows {
		data = binary.AppendUvarint(data, 1<<1)
		data = append(data, 0)
		data = binary.AppendUvarint(data, uint64(width-1)<<1)
		data = append(data, 1)
	}
	return data
}

// TestRowRepetitionsMatchRows holds the check to pages of whole rows, of
// widths that are and are not multiples of 8, whose bit-packed levels
// start at a row's start or inside a row, or written as runs of repeats,
// and to every page with one level flipped.
func TestRowRepetitionsMatchRows(t *testing.T) {
	for _, width := range []int{1, 2, 3, 7, 8, 10, 12, 64, 384} {
		reps := newRowRepetitions(width)
		for _, k := range []int{0, 1, 3, 5, 13} {
			if k >= width || k > 0 && width == 1 {
				continue
			}
			rows := 1100/width + 1 // more than 64 bytes of levels
			count := rows * width
			for _, run := range []int{63, 200} {
				data := bitPackedRows(width, 0, count, run)
				if k > 0 {
					data = append(startedRow(k), bitPackedRows(width, k, count-k, run)...)
				}
				if !reps.match(data, count) {
					t.Fatalf("width %d, bit-packed from level %d in runs of %d groups: %d rows refused", width, k, run, rows)
				}
				flipEach(t, reps, data, count, width, k)
			}
			if k == 0 && width > 1 {
				data := runRows(width, rows)
				if !reps.match(data, count) {
					t.Fatalf("width %d in runs of repeats: %d rows refused", width, rows)
				}
				flipEach(t, reps, data, count, width, k)
			}
		}
	}
}

// TestRowRepetitionsWideRows holds the byte-by-byte check, for rows too
// wide to lay out, to rows and to rows with a level flipped.
func TestRowRepetitionsWideRows(t *testing.T) {
	width := maxTiledWidth + 12
	reps := newRowRepetitions(width)
	for _, k := range []int{0, 5} {
		count := 2 * width
		data := bitPackedRows(width, 0, count, 200)
		if k > 0 {
			data = append(startedRow(k), bitPackedRows(width, k, count-k, 200)...)
		}
		if !reps.match(data, count) {
			t.Fatalf("width %d from level %d: rows refused", width, k)
		}
		for _, i := range []int{len(data) - 1, len(data) / 2, width/8 + 1, width/8 + 2, 3} {
			flipped := bytes.Clone(data)
			flipped[i] ^= 0x10
			if reps.match(flipped, count) != repetitionsByLevel(flipped, count, width) {
				t.Fatalf("width %d from level %d, byte %d flipped: the check and the levels one by one disagree", width, k, i)
			}
		}
	}
}

// flipEach flips each bit of every eleventh byte of data in turn, and
// holds the check to the levels decoded one by one.
func flipEach(t *testing.T, reps *rowRepetitions, data []byte, count, width, k int) {
	t.Helper()
	for i := len(data) - 1; i >= 0; i -= 11 {
		for bit := range 8 {
			flipped := bytes.Clone(data)
			flipped[i] ^= 1 << bit
			want := repetitionsByLevel(flipped, count, width)
			if got := reps.match(flipped, count); got != want {
				t.Fatalf("width %d, from level %d, byte %d bit %d flipped: match %t, the levels one by one %t", width, k, i, bit, got, want)
			}
		}
	}
}

// repetitionsByLevel decodes the levels one by one and checks them.
func repetitionsByLevel(data []byte, count, width int) bool {
	reps, ok := expandHybrid(data, 1, count)
	for i := 0; ok && i < count; i++ {
		ok = (reps[i] == 0) == (i%width == 0) && reps[i] <= 1
	}
	return ok && count%width == 0
}

// BenchmarkRepetitionPattern checks the repetition levels of a 64 KiB page
// of float32 rows, as the sink writes them: rows of 10 bit-packed, rows of
// 64 as runs of repeats.
func BenchmarkRepetitionPattern(b *testing.B) {
	const count = 1 << 14
	for _, width := range []int{10, 64} {
		rows := count / width
		data := bitPackedRows(width, 0, rows*width, 63)
		name := "bit-packed"
		if width >= 16 {
			data, name = runRows(width, rows), "runs"
		}
		b.Run(fmt.Sprintf("%s/%d", name, width), func(b *testing.B) {
			reps := newRowRepetitions(width)
			if !reps.match(data, rows*width) {
				b.Fatal("the page's levels fail the check")
			}
			b.SetBytes(int64(rows * width * 4))
			for b.Loop() {
				reps.match(data, rows*width)
			}
		})
	}
}
