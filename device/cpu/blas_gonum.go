//go:build !openblas

package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// defaultBLAS is gonum's pure-Go BLAS. Build with the openblas tag to use
// OpenBLAS instead.
func defaultBLAS() blas.Float32 { return gonum.Implementation{} }

// BLASName names the BLAS the default build uses.
const BLASName = "gonum (pure Go)"

// serially prepares impl to compute each product on the calling thread,
// and reports whether products must be cut into tiles for it: gonum's
// BLAS fans a large product out over the cores.
func serially(impl blas.Float32) (tile bool) {
	_, tile = impl.(gonum.Implementation)
	return tile
}
