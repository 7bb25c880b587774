// Package finite finds the first NaN or infinity in a slice of floats, at
// about the speed of reading it: the check a model pays on every input
// value.
package finite

import "unsafe"

// Index32 returns the index of the first NaN or ±Inf in x, or -1.
func Index32(x []float32) int {
	const exp32 = 0x7f800000
	if addr := uintptr(unsafe.Pointer(unsafe.SliceData(x))); len(x) > 0 && addr%8 != 0 {
		// The words below must be aligned: one float first, or, for
		// floats not even at their own alignment, a float at a time.
		if addr%4 != 0 {
			return first(bits32(x), exp32)
		}
		if first(bits32(x[:1]), exp32) == 0 {
			return 0
		}
		if i := Index32(x[1:]); i >= 0 { // aligned now: no further call
			return i + 1
		}
		return -1
	}
	// Two floats a word: a lane of x&exp^exp is zero for NaN and ±Inf,
	// and below 1<<31 otherwise, so (w - lo) &^ w sets a lane's top bit
	// where some lane is zero (the standard test for a zero lane: exact
	// as to whether any is).
	const (
		exp = 0x7f800000_7f800000
		lo  = 0x00000001_00000001
		hi  = 0x80000000_80000000
	)
	pairs := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), len(x)/2)
	for start := 0; start < len(pairs); start += 32 {
		var flag uint64
		for _, v := range pairs[start:min(start+32, len(pairs))] {
			w := v&exp ^ exp
			flag |= (w - lo) &^ w
		}
		if flag&hi != 0 {
			end := min(2*(start+32), len(x))
			return 2*start + first(bits32(x[2*start:end]), exp32)
		}
	}
	if len(x)%2 == 1 && first(bits32(x[len(x)-1:]), exp32) == 0 {
		return len(x) - 1
	}
	return -1
}

func bits32(x []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// Index64 returns the index of the first NaN or ±Inf in x, or -1.
func Index64(x []float64) int {
	return first(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), len(x)), 0x7ff0000000000000)
}

// first returns the index of the first float, given as its bits, whose
// exponent bits are all set (NaN, ±Inf), or -1. A chunk of 64 is tested
// without a branch a value; only a chunk that holds one is searched.
func first[U uint32 | uint64](bits []U, exp U) int {
	top := ^(^U(0) >> 1)
	for start := 0; start < len(bits); start += 64 {
		chunk := bits[start:min(start+64, len(bits))]
		var flag U
		for _, v := range chunk {
			x := v&exp ^ exp     // zero for NaN and ±Inf; otherwise below top
			flag |= (x - 1) &^ x // top set only where x was zero
		}
		if flag&top != 0 {
			for i, v := range chunk {
				if v&exp == exp {
					return start + i
				}
			}
		}
	}
	return -1
}
