//go:build goexperiment.simd && amd64

package cpu

import "simd/archsimd"

// relu sets the negative values of y to 0, 16 (AVX-512) or 8 (AVX2) at a
// time where the processor can, by the same sign-mask trick as
// reluPortable, so every build gives the same bits. Built with
// GOEXPERIMENT=simd.
func relu(y []float32) {
	i := 0
	switch {
	case archsimd.X86.AVX512():
		for ; i+16 <= len(y); i += 16 {
			v := archsimd.LoadFloat32x16Slice(y[i:]).AsInt32x16()
			v.AndNot(v.ShiftAllRight(31)).AsFloat32x16().StoreSlice(y[i:])
		}
	case archsimd.X86.AVX2():
		for ; i+8 <= len(y); i += 8 {
			v := archsimd.LoadFloat32x8Slice(y[i:]).AsInt32x8()
			v.AndNot(v.ShiftAllRight(31)).AsFloat32x8().StoreSlice(y[i:])
		}
	}
	reluPortable(y[i:])
}
