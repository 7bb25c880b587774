package finite

import (
	"math"
	"testing"
	"unsafe"
)

// TestIndex puts NaN and ±Inf at every place of slices around the chunk
// size, among the finite values nearest them (the largest, the smallest
// subnormal, -0), and wants the first one's index.
func TestIndex(t *testing.T) {
	finite32 := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 1}
	finite64 := []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1), 1}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, n := range []int{0, 1, 63, 64, 65, 200} {
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
				if i := Index32(v32); i != at {
					t.Fatalf("float32, %d values, %v at %d: Index32 = %d", n, bad, at, i)
				}
				if i := Index64(v64); i != at {
					t.Fatalf("float64, %d values, %v at %d: Index64 = %d", n, bad, at, i)
				}
			}
		}
	}
}

// BenchmarkIndex32 scans a batch of 256 rows of 64 features, the check
// every CPU batch pays.
func BenchmarkIndex32(b *testing.B) {
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = float32(i)
	}
	b.SetBytes(int64(len(x) * 4))
	for b.Loop() {
		if Index32(x) != -1 {
			b.Fatal("found one")
		}
	}
}

// TestIndex32Unaligned starts the slice at every float of a word, and at
// addresses floats are not aligned to.
func TestIndex32Unaligned(t *testing.T) {
	raw := make([]byte, 4*301)
	for shift := 1; shift < 4; shift++ {
		odd := unsafe.Slice((*float32)(unsafe.Pointer(&raw[shift])), 300)
		clear(raw)
		odd[150] = float32(math.Inf(1))
		if i := Index32(odd); i != 150 {
			t.Fatalf("floats at byte %d, Inf at 150: Index32 = %d", shift, i)
		}
	}
	base := make([]float32, 300)
	for off := range 4 {
		for at := off; at < len(base); at += 37 {
			clear(base)
			base[at] = float32(math.NaN())
			if i := Index32(base[off:]); i != at-off {
				t.Fatalf("slice from %d, NaN at %d: Index32 = %d, want %d", off, at, i, at-off)
			}
		}
	}
}
