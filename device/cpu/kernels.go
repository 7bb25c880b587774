package cpu

import "math"

// The element-wise passes of a forward step, between the matrix products:
// small next to a product, but paid on every value of every batch.

// expShifted replaces each value v of row by e**(v-top) in float32 and
// returns their sum. The exponential is Cephes' expf (a reduction by ln 2
// and a degree-6 polynomial, within 2 ulp) for v-top ≤ 0, 0 below -87,
// where e**x leaves float32's normal range. It is a loop over the row, not
// a function called a value, so the values' steps overlap.
func expShifted(row []float32, top float32) (sum float32) {
	const (
		log2e = 1.44269504088896341
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
	)
	for j, v := range row {
		x := v - top
		if x < -87 {
			row[j] = 0
			continue
		}
		// n = x/ln 2 rounded to the nearest integer: x ≤ 0, so a
		// conversion, which truncates toward zero, of a value half lower
		// (a tie rounds away from zero: |r| ≤ ln 2 / 2 all the same).
		n := float32(int32(x*log2e - 0.5))
		r := x - n*ln2Hi - n*ln2Lo
		// The polynomial by Estrin's scheme: three dependent steps, not
		// Horner's six.
		r2 := r * r
		p := (5.0000001201e-1 + 1.6666665459e-1*r) + r2*((4.1665795894e-2+8.3334519073e-3*r)+r2*(1.3981999507e-3+1.9875691500e-4*r))
		e := (p*r2 + r + 1) * math.Float32frombits(uint32(int32(n)+127)<<23)
		row[j] = e
		sum += e
	}
	return sum
}

// softmax replaces row by its softmax, stably, in float32.
func softmax(row []float32) {
	top := row[0]
	for _, v := range row[1:] {
		top = max(top, v)
	}
	inv := 1 / expShifted(row, top)
	for j := range row {
		row[j] *= inv
	}
}

// argmax returns the index of the largest value of row (the first on ties).
func argmax(row []float32) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}
