//go:build !purego

#include "textflag.h"

// func avx2(y []float32)
// Each value ANDed with the complement of its sign bit spread over the
// word (VPSRAD by 31): a negative value, -0 and a negative NaN become +0.
TEXT ·avx2(SB), NOSPLIT, $0-24
	MOVQ y_base+0(FP), SI
	MOVQ y_len+8(FP), CX
	SHRQ $3, CX
	JZ   done

	// Four vectors a turn while 32 or more values remain.
	MOVQ CX, DX
	SHRQ $2, DX
	JZ   tail

loop4:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VPSRAD  $31, Y0, Y4
	VPSRAD  $31, Y1, Y5
	VPSRAD  $31, Y2, Y6
	VPSRAD  $31, Y3, Y7
	VPANDN  Y0, Y4, Y0
	VPANDN  Y1, Y5, Y1
	VPANDN  Y2, Y6, Y2
	VPANDN  Y3, Y7, Y3
	VMOVUPS Y0, (SI)
	VMOVUPS Y1, 32(SI)
	VMOVUPS Y2, 64(SI)
	VMOVUPS Y3, 96(SI)
	ADDQ    $128, SI
	DECQ    DX
	JNZ     loop4

tail:
	ANDQ $3, CX
	JZ   end

loop1:
	VMOVUPS (SI), Y0
	VPSRAD  $31, Y0, Y4
	VPANDN  Y0, Y4, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     loop1

end:
	VZEROUPPER

done:
	RET
