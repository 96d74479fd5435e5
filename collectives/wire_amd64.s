#include "textflag.h"

// func encodeF16AVX(dst *uint16, src *float32, n int, scale float32)
// dst[i] = fp16(src[i]·scale), round to nearest even, n a multiple of 8.
// VMULPS rounds as the scalar multiply does.
TEXT ·encodeF16AVX(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y15
loop:
	TESTQ     CX, CX
	JE        done
	VMULPS    (SI), Y15, Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       loop
done:
	VZEROUPPER
	RET

// func decodeF16AVX(dst *float32, src *uint16, n int, inv float32, add bool)
// dst[i] = f32(src[i])·inv (+ dst[i] when add), n a multiple of 8.
TEXT ·decodeF16AVX(SB), NOSPLIT, $0-29
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Y15
	MOVBLZX      add+28(FP), AX
	TESTQ        AX, AX
	JNE          addloop
setloop:
	TESTQ     CX, CX
	JE        done
	VCVTPH2PS (SI), Y0
	VMULPS    Y15, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       setloop
addloop:
	TESTQ     CX, CX
	JE        done
	VCVTPH2PS (SI), Y0
	VMULPS    Y15, Y0, Y0
	VADDPS    (DI), Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       addloop
done:
	VZEROUPPER
	RET
