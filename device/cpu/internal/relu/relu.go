// Package relu sets the negative values of a float32 slice to 0 in place:
// the CPU device's ReLU pass, in AVX2 assembly on amd64 (the purego build
// tag leaves it out) and portable Go elsewhere, with the same bits on every
// build. It is a package of its own because a package that uses cgo (the
// CPU device with OpenBLAS) cannot hold Go assembly.
package relu

import "math"

// Portable sets the negative values of y to 0 without a branch or a float
// compare: a float's sign bit, spread over the word by an arithmetic
// shift, masks the value off. -0 and negative NaNs become +0.
func Portable(y []float32) {
	for j, v := range y {
		b := math.Float32bits(v)
		y[j] = math.Float32frombits(b &^ uint32(int32(b)>>31))
	}
}
