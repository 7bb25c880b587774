//go:build !(goexperiment.simd && amd64)

package cpu

// relu sets the negative values of y to 0 (portable; GOEXPERIMENT=simd on
// amd64 builds a vector version).
func relu(y []float32) { reluPortable(y) }
