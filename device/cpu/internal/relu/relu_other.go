//go:build !amd64 || purego

package relu

// InPlace sets the negative values of y to 0, as [Portable].
func InPlace(y []float32) { Portable(y) }
