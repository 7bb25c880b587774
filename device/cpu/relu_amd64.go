//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2

// relu sets the negative values of y to 0, eight at a time with AVX2 where
// the processor has it, by the same sign-mask trick as reluPortable, so
// every build gives the same bits.
func relu(y []float32) {
	i := 0
	if hasAVX2 {
		i = len(y) &^ 7
		reluAVX2(y[:i])
	}
	reluPortable(y[i:])
}

// reluAVX2 is relu over y, whose length is a multiple of 8.
//
//go:noescape
func reluAVX2(y []float32)
