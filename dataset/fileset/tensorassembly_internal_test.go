package fileset

import (
	"math/rand/v2"
	"testing"
)

// TestEqualPrefix checks the word-at-a-time prefix against a plain loop,
// with the first other level at every place of levels of many lengths.
func TestEqualPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 70 {
		for at := 0; at <= n; at++ {
			levels := make([]int16, n)
			for i := range levels {
				levels[i] = 3
			}
			if at < n {
				levels[at] = int16(rng.IntN(3)) // 0, 1 or 2: another level
				if at+1 < n {
					levels[n-1] = -3 // a later one must not count
				}
			}
			want := 0
			for want < n && levels[want] == 3 {
				want++
			}
			if got := equalPrefix(levels, 3); got != want {
				t.Fatalf("%d levels, other at %d: equalPrefix = %d, want %d", n, at, got, want)
			}
		}
	}
}
