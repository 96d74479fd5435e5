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

// func lanes8x4AVX2(out, v *float32, n, stride int)
// out[k*8 + l] = Σ over i ≡ l mod 8, in order, of v[k*stride + i], i < n,
// k < 4: sum8's partial sums of four planes at once (four independent
// chains of adds, so the latency of one hides behind the others).
TEXT ·lanes8x4AVX2(SB), NOSPLIT, $0-32
	MOVQ   v+8(FP), SI
	MOVQ   n+16(FP), CX
	MOVQ   stride+24(FP), R8
	SHLQ   $2, R8
	LEAQ   (R8)(R8*2), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ  CX, CX
	JZ     lanesdone

lanesloop:
	VADDPS (SI), Y0, Y0
	VADDPS (SI)(R8*1), Y1, Y1
	VADDPS (SI)(R8*2), Y2, Y2
	VADDPS (SI)(R9*1), Y3, Y3
	ADDQ   $32, SI
	SUBQ   $8, CX
	JNZ    lanesloop

lanesdone:
	MOVQ    out+0(FP), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, 64(AX)
	VMOVUPS Y3, 96(AX)
	VZEROUPPER
	RET

// func copyRowsAVX2(dst *float32, dstStride int, src *float32, srcStride, rows, width int)
// Copies rows rows of width floats (width ≥ 8) from src, rows srcStride
// floats apart, to dst, rows dstStride apart: 8 floats at a time, the last
// 8 of a row ending at its end (rewriting the same values where they
// overlap the ones before).
TEXT ·copyRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  dstStride+8(FP), R8
	SHLQ  $2, R8
	MOVQ  src+16(FP), SI
	MOVQ  srcStride+24(FP), R9
	SHLQ  $2, R9
	MOVQ  rows+32(FP), CX
	MOVQ  width+40(FP), R11
	LEAQ  -32(R11*4), R11 // the byte offset of a row's last 8 floats
	TESTQ CX, CX
	JZ    rowsdone

rowsrow:
	XORQ AX, AX

rowscol:
	CMPQ    AX, R11
	JAE     rowslast
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     rowscol

rowslast:
	VMOVUPS (SI)(R11*1), Y0
	VMOVUPS Y0, (DI)(R11*1)
	ADDQ    R8, DI
	ADDQ    R9, SI
	DECQ    CX
	JNZ     rowsrow

rowsdone:
	VZEROUPPER
	RET
