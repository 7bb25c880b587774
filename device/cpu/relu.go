//go:build !amd64 || purego

package cpu

// relu sets the negative values of y to 0 (portable; amd64 builds a vector
// version).
func relu(y []float32) { reluPortable(y) }
