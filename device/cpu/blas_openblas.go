//go:build openblas

package cpu

// #cgo LDFLAGS: -lopenblas
import "C"

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/netlib/blas/netlib"
)

// defaultBLAS is OpenBLAS, through gonum's netlib bindings (cgo). It needs
// the OpenBLAS library and headers (Debian: libopenblas-dev).
func defaultBLAS() blas.Float32 { return netlib.Implementation{} }

// BLASName names the BLAS this build uses.
const BLASName = "OpenBLAS (cgo, gonum.org/v1/netlib)"
