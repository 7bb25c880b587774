//go:build openblas

package cpu

// #cgo LDFLAGS: -lopenblas
// void openblas_set_num_threads(int num_threads);
import "C"

import (
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/netlib/blas/netlib"
)

// defaultBLAS is OpenBLAS, through gonum's netlib bindings (cgo). It needs
// the OpenBLAS library and headers (Debian: libopenblas-dev).
func defaultBLAS() blas.Float32 { return netlib.Implementation{} }

// BLASName names the BLAS this build uses.
const BLASName = "OpenBLAS (cgo, gonum.org/v1/netlib)"

// oneThread sets OpenBLAS to one thread, once. OpenBLAS 0.3.21 (Debian's)
// sets its threads for the process only; sessions that each take a core
// want one each, not a fan-out over every core apiece.
var oneThread sync.Once

// serially prepares impl to compute each product on the calling thread,
// and reports whether products are cut into tiles for it: gonum's BLAS
// fans a large product out over the cores; OpenBLAS, set to one thread,
// does not, but two sessions ran 1.57–1.64 times one in tiles against
// 1.49 on whole products (BENCHMARKS.md), so it gets tiles too.
func serially(impl blas.Float32) (tile bool) {
	switch impl.(type) {
	case netlib.Implementation:
		oneThread.Do(func() { C.openblas_set_num_threads(1) })
		return true
	case gonum.Implementation:
		return true
	}
	return false
}
