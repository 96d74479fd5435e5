//go:build !purego

#include "textflag.h"

// Direct 3×3 convolution micro-kernels (AVX2 + FMA3), see direct.go. Each
// call computes a tile of the output: outputs o0.. (4 or 8 channels) over
// one row segment (16 or 8 pixels), summing over the c input channels and
// the 9 taps in that order, from 0. The input is a zero-padded copy:
// x points at the padded pixel (row, x0) of channel 0, the window's top
// left; xrow and xplane are the padded row and plane lengths in floats.
// w points at tap 0 of channel 0 for output o0, in the [c][9][o] layout:
// wtap floats (o) between taps, 9·wtap between channels. y points at the
// tile's first output; ystride floats (h·w) between output channels.

// CONV3X3_PROLOGUE loads the arguments of both forward kernels (byte
// strides: R12 between output channels, R8 and R9 one and two padded
// rows, R10 a padded plane, R11 a tap's weights; R13 = 0) and zeroes the
// accumulators Y0–Y7.
#define CONV3X3_PROLOGUE \
	MOVQ   y+0(FP), DX; \
	MOVQ   ystride+8(FP), R12; \
	SHLQ   $2, R12; \
	MOVQ   x+16(FP), DI; \
	MOVQ   xrow+24(FP), R8; \
	SHLQ   $2, R8; \
	LEAQ   (R8)(R8*1), R9; \
	MOVQ   xplane+32(FP), R10; \
	SHLQ   $2, R10; \
	MOVQ   w+40(FP), SI; \
	MOVQ   wtap+48(FP), R11; \
	SHLQ   $2, R11; \
	MOVQ   c+56(FP), CX; \
	XORQ   R13, R13; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

// TAP16 is one tap for the 4×16 tile: two input vectors, four broadcast
// weights, eight FMAs; BX moves to the next tap.
#define TAP16(off, off2, idx) \
	VMOVUPS      off(DI)(idx*1), Y8; \
	VMOVUPS      off2(DI)(idx*1), Y9; \
	VBROADCASTSS (BX), Y10; \
	VFMADD231PS  Y8, Y10, Y0; \
	VFMADD231PS  Y9, Y10, Y1; \
	VBROADCASTSS 4(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y2; \
	VFMADD231PS  Y9, Y11, Y3; \
	VBROADCASTSS 8(BX), Y10; \
	VFMADD231PS  Y8, Y10, Y4; \
	VFMADD231PS  Y9, Y10, Y5; \
	VBROADCASTSS 12(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y6; \
	VFMADD231PS  Y9, Y11, Y7; \
	ADDQ         R11, BX

// func conv3x3o4w16(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int)
TEXT ·conv3x3o4w16(SB), NOSPLIT, $0-64
	CONV3X3_PROLOGUE
	TESTQ CX, CX
	JZ    o4store

o4chan:
	MOVQ SI, BX
	TAP16(0, 32, R13)
	TAP16(4, 36, R13)
	TAP16(8, 40, R13)
	TAP16(0, 32, R8)
	TAP16(4, 36, R8)
	TAP16(8, 40, R8)
	TAP16(0, 32, R9)
	TAP16(4, 36, R9)
	TAP16(8, 40, R9)
	MOVQ BX, SI
	ADDQ R10, DI
	DECQ CX
	JNZ  o4chan

o4store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R12, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R12, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R12, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET

// TAP8 is one tap for the 8×8 tile: one input vector, eight broadcast
// weights, eight FMAs.
#define TAP8(off, idx) \
	VMOVUPS      off(DI)(idx*1), Y8; \
	VBROADCASTSS (BX), Y10; \
	VFMADD231PS  Y8, Y10, Y0; \
	VBROADCASTSS 4(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y1; \
	VBROADCASTSS 8(BX), Y10; \
	VFMADD231PS  Y8, Y10, Y2; \
	VBROADCASTSS 12(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y3; \
	VBROADCASTSS 16(BX), Y10; \
	VFMADD231PS  Y8, Y10, Y4; \
	VBROADCASTSS 20(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y5; \
	VBROADCASTSS 24(BX), Y10; \
	VFMADD231PS  Y8, Y10, Y6; \
	VBROADCASTSS 28(BX), Y11; \
	VFMADD231PS  Y8, Y11, Y7; \
	ADDQ         R11, BX

// func conv3x3o8w8(y *float32, ystride int, x *float32, xrow, xplane int, w *float32, wtap, c int)
TEXT ·conv3x3o8w8(SB), NOSPLIT, $0-64
	CONV3X3_PROLOGUE
	TESTQ CX, CX
	JZ    o8store

o8chan:
	MOVQ SI, BX
	TAP8(0, R13)
	TAP8(4, R13)
	TAP8(8, R13)
	TAP8(0, R8)
	TAP8(4, R8)
	TAP8(8, R8)
	TAP8(0, R9)
	TAP8(4, R9)
	TAP8(8, R9)
	MOVQ BX, SI
	ADDQ R10, DI
	DECQ CX
	JNZ  o8chan

o8store:
	VMOVUPS Y0, (DX)
	ADDQ    R12, DX
	VMOVUPS Y1, (DX)
	ADDQ    R12, DX
	VMOVUPS Y2, (DX)
	ADDQ    R12, DX
	VMOVUPS Y3, (DX)
	ADDQ    R12, DX
	VMOVUPS Y4, (DX)
	ADDQ    R12, DX
	VMOVUPS Y5, (DX)
	ADDQ    R12, DX
	VMOVUPS Y6, (DX)
	ADDQ    R12, DX
	VMOVUPS Y7, (DX)
	VZEROUPPER
	RET

// DW3 is one 8-pixel step of the weight-gradient kernel: the 4 output
// gradients at (row, x0) and the 3 input vectors at (row+dy, x0+dx), dx =
// 0, 1, 2, into 12 accumulators (output j, tap dx: Y(j*3+dx)).
#define DW3 \
	VMOVUPS     (DI), Y12; \
	VMOVUPS     4(DI), Y13; \
	VMOVUPS     8(DI), Y14; \
	VMOVUPS     (SI), Y15; \
	VFMADD231PS Y12, Y15, Y0; \
	VFMADD231PS Y13, Y15, Y1; \
	VFMADD231PS Y14, Y15, Y2; \
	VMOVUPS     (SI)(R12*1), Y15; \
	VFMADD231PS Y12, Y15, Y3; \
	VFMADD231PS Y13, Y15, Y4; \
	VFMADD231PS Y14, Y15, Y5; \
	VMOVUPS     (SI)(R13*1), Y15; \
	VFMADD231PS Y12, Y15, Y6; \
	VFMADD231PS Y13, Y15, Y7; \
	VFMADD231PS Y14, Y15, Y8; \
	VMOVUPS     (SI)(R9*1), Y15; \
	VFMADD231PS Y12, Y15, Y9; \
	VFMADD231PS Y13, Y15, Y10; \
	VFMADD231PS Y14, Y15, Y11

// func conv3x3dw(acc *float32, dy *float32, dystride int, x *float32, xrow, h, w, n, dysample, xsample int)
// acc[(j*3+dx)*8 + lane] = the lane's share of Σ over n samples and the
// h×w plane of dy[s][j][r][q] · x[s][r][q+dx] (x: the padded input at row
// dy of the window, one channel; dy: output channel o0's plane; w a
// multiple of 8; dysample, xsample: floats between samples), j < 4.
TEXT ·conv3x3dw(SB), NOSPLIT, $0-80
	MOVQ acc+0(FP), DX
	MOVQ dystride+16(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*1), R13
	LEAQ (R13)(R12*1), R9
	MOVQ xrow+32(FP), R8
	SHLQ $2, R8
	MOVQ w+48(FP), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ R11, R11 // sample

dwsample:
	CMPQ R11, n+56(FP)
	JAE  dwstore
	MOVQ dysample+64(FP), AX
	IMULQ R11, AX
	SHLQ $2, AX
	MOVQ dy+8(FP), SI
	ADDQ AX, SI
	MOVQ xsample+72(FP), AX
	IMULQ R11, AX
	SHLQ $2, AX
	MOVQ x+24(FP), DI
	ADDQ AX, DI
	MOVQ h+40(FP), CX
	TESTQ CX, CX
	JZ   dwnext

dwrow:
	MOVQ DI, AX // the row's start in x
	MOVQ R10, BX
dwcol:
	DW3
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, BX
	JNZ  dwcol
	LEAQ (AX)(R8*1), DI // next padded row
	DECQ CX
	JNZ  dwrow

dwnext:
	INCQ R11
	JMP  dwsample

dwstore:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VMOVUPS Y8, 256(DX)
	VMOVUPS Y9, 288(DX)
	VMOVUPS Y10, 320(DX)
	VMOVUPS Y11, 352(DX)
	VZEROUPPER
	RET
