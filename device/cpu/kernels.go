package cpu

import "math"

// The element-wise passes of a forward step, between the matrix products:
// small next to a product, but paid on every value of every batch.

// exp32 is e**x in float32 (Cephes' expf: a reduction by ln 2 and a
// degree-6 polynomial, within 2 ulp), for softmax inputs x ≤ 0; it is 0
// below -87, where e**x leaves float32's normal range.
func exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
	)
	if x < -87 {
		return 0
	}
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2Hi - n*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	e := p*r*r + r + 1
	return e * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// softmax replaces row by its softmax, stably, in float32.
func softmax(row []float32) {
	top := row[0]
	for _, v := range row[1:] {
		top = max(top, v)
	}
	var sum float32
	for j, v := range row {
		e := exp32(v - top)
		row[j] = e
		sum += e
	}
	inv := 1 / sum
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
