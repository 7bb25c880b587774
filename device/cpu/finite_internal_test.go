package cpu

import (
	"math"
	"testing"
)

func TestFirstNonFinite(t *testing.T) {
	x := make([]float32, 100)
	if i := firstNonFinite(x); i != -1 {
		t.Fatalf("finite values: %d", i)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		x[63] = float32(v)
		if i := firstNonFinite(x); i != 63 {
			t.Fatalf("%v at 63: %d", v, i)
		}
		x[63] = math.MaxFloat32
	}
}

// BenchmarkFirstNonFinite scans one batch of 256 rows of 64 features, the
// check every CPU batch pays.
func BenchmarkFirstNonFinite(b *testing.B) {
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = float32(i)
	}
	for b.Loop() {
		if firstNonFinite(x) != -1 {
			b.Fatal("found one")
		}
	}
}
