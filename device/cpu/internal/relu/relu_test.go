package relu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 100, 1000} {
		y := make([]float32, n)
		for i := range y {
			y[i] = float32(rng.NormFloat64())
		}
		if n > 3 {
			y[0], y[1], y[2] = float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.Inf(1))
		}
		want := make([]float32, n)
		for i, v := range y {
			want[i] = max(v, 0)
		}
		InPlace(y)
		for i := range y {
			if y[i] != want[i] || math.Signbit(float64(y[i])) {
				t.Fatalf("n=%d: InPlace[%d] = %v, want %v", n, i, y[i], want[i])
			}
		}
	}
}

// The vector ReLU gives the portable one's bits for any bits, NaNs
// included, at any length and alignment.
func TestInPlaceMatchesPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]float32, 200)
	for n := range 140 {
		for _, off := range []int{0, 1, 3} {
			y := buf[off : off+n]
			for i := range y {
				y[i] = math.Float32frombits(rng.Uint32())
			}
			want := append([]float32(nil), y...)
			Portable(want)
			InPlace(y)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d, offset %d: InPlace[%d] = %#x, portable %#x", n, off, i, math.Float32bits(y[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// BenchmarkInPlace runs the ReLU pass over one batch of 256 rows of 256.
func BenchmarkInPlace(b *testing.B) {
	y := make([]float32, 256*256)
	for b.Loop() {
		InPlace(y)
	}
	b.SetBytes(int64(4 * len(y)))
}

// BenchmarkPortable is BenchmarkInPlace without the vector code.
func BenchmarkPortable(b *testing.B) {
	y := make([]float32, 256*256)
	for b.Loop() {
		Portable(y)
	}
	b.SetBytes(int64(4 * len(y)))
}
