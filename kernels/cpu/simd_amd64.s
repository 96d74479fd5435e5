//go:build !purego

#include "textflag.h"

// Element-wise loops over n floats, n a multiple of 8: 32 per iteration
// while at least 32 are left, then 8. Unaligned loads and stores.

// func addToAVX2(dst, src *float32, n int)
// dst[i] = dst[i] + src[i]
TEXT ·addToAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $32
	JB   add8

add32:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS  (SI), Y0, Y0
	VADDPS  32(SI), Y1, Y1
	VADDPS  64(SI), Y2, Y2
	VADDPS  96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $32, CX
	CMPQ    CX, $32
	JAE     add32

add8:
	CMPQ    CX, $8
	JB      adddone
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     add8

adddone:
	VZEROUPPER
	RET

// func reluAVX2(y, x *float32, n int)
// y[i] = x[i] < 0 ? +0 : x[i]  (the mask of x < 0, ordered, cleared from x)
TEXT ·reluAVX2(SB), NOSPLIT, $0-24
	MOVQ   y+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y7, Y7, Y7
	CMPQ   CX, $32
	JB     relu8

relu32:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VCMPPS  $1, Y7, Y0, Y4 // Y4 = Y0 < 0
	VCMPPS  $1, Y7, Y1, Y5
	VCMPPS  $1, Y7, Y2, Y6
	VCMPPS  $1, Y7, Y3, Y8
	VANDNPS Y0, Y4, Y0     // Y0 = ^Y4 & Y0
	VANDNPS Y1, Y5, Y1
	VANDNPS Y2, Y6, Y2
	VANDNPS Y3, Y8, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $32, CX
	CMPQ    CX, $32
	JAE     relu32

relu8:
	CMPQ    CX, $8
	JB      reludone
	VMOVUPS (SI), Y0
	VCMPPS  $1, Y7, Y0, Y4
	VANDNPS Y0, Y4, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     relu8

reludone:
	VZEROUPPER
	RET

// func reluGradAVX2(dx, dy, y *float32, n int)
// dx[i] = 0 < y[i] ? dy[i] : +0  (dy masked by 0 < y, ordered)
TEXT ·reluGradAVX2(SB), NOSPLIT, $0-32
	MOVQ   dx+0(FP), DI
	MOVQ   dy+8(FP), SI
	MOVQ   y+16(FP), DX
	MOVQ   n+24(FP), CX
	VXORPS Y7, Y7, Y7
	CMPQ   CX, $32
	JB     rg8

rg32:
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VCMPPS  $1, Y0, Y7, Y0 // Y0 = 0 < Y0
	VCMPPS  $1, Y1, Y7, Y1
	VCMPPS  $1, Y2, Y7, Y2
	VCMPPS  $1, Y3, Y7, Y3
	VANDPS  (SI), Y0, Y0
	VANDPS  32(SI), Y1, Y1
	VANDPS  64(SI), Y2, Y2
	VANDPS  96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	ADDQ    $128, DX
	SUBQ    $32, CX
	CMPQ    CX, $32
	JAE     rg32

rg8:
	CMPQ    CX, $8
	JB      rgdone
	VMOVUPS (DX), Y0
	VCMPPS  $1, Y0, Y7, Y0
	VANDPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     rg8

rgdone:
	VZEROUPPER
	RET
