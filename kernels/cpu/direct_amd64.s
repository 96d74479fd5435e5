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

// SAMPLE_PTRS points SI at sample R11's dy (dy + R11·DYS floats) and DI
// at its x (x + R11·XS floats), DYS and XS the kernels' dysample and
// xsample arguments.
#define SAMPLE_PTRS(DYS, XS) \
	MOVQ  DYS, AX; \
	IMULQ R11, AX; \
	SHLQ  $2, AX; \
	MOVQ  dy+8(FP), SI; \
	ADDQ  AX, SI; \
	MOVQ  XS, AX; \
	IMULQ R11, AX; \
	SHLQ  $2, AX; \
	MOVQ  x+24(FP), DI; \
	ADDQ  AX, DI

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

// ZERO12 zeroes the weight-gradient kernels' accumulators Y0–Y11;
// STORE12 stores them, 8 lanes each, at (base), 32(base), … 352(base).
#define ZERO12 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

#define STORE12(base) \
	VMOVUPS Y0, (base); \
	VMOVUPS Y1, 32(base); \
	VMOVUPS Y2, 64(base); \
	VMOVUPS Y3, 96(base); \
	VMOVUPS Y4, 128(base); \
	VMOVUPS Y5, 160(base); \
	VMOVUPS Y6, 192(base); \
	VMOVUPS Y7, 224(base); \
	VMOVUPS Y8, 256(base); \
	VMOVUPS Y9, 288(base); \
	VMOVUPS Y10, 320(base); \
	VMOVUPS Y11, 352(base)

// DW12 is one 8-pixel step of the weight-gradient kernels: the 4 output
// gradients at SI, SI+R12, SI+R13 and SI+D3 (output channels o0 … o0+3)
// and the 3 input vectors X0, X1, X2 (the 3 taps), into 12 accumulators
// (output j, tap t: Y(j*3+t)).
#define DW12(X0, X1, X2, D3) \
	VMOVUPS     X0, Y12; \
	VMOVUPS     X1, Y13; \
	VMOVUPS     X2, Y14; \
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
	VMOVUPS     (SI)(D3*1), Y15; \
	VFMADD231PS Y12, Y15, Y9; \
	VFMADD231PS Y13, Y15, Y10; \
	VFMADD231PS Y14, Y15, Y11

// DW3 is DW12 for the 3×3 kernel: the input at (row+dy, x0+dx), dx = 0, 1,
// 2 (adjacent pixels), the fourth gradient at SI+R9.
#define DW3 DW12((DI), 4(DI), 8(DI), R9)

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
	ZERO12
	XORQ R11, R11 // sample

dwsample:
	CMPQ R11, n+56(FP)
	JAE  dwstore
	SAMPLE_PTRS(dysample+64(FP), xsample+72(FP))
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
	STORE12(DX)
	VZEROUPPER
	RET

// The stride-1 k×k kernels (directk.go) compute a "wide" output: over a
// zero-padded image of rows wp wide, output pixel (r, q) reads the taps
// at flat offsets r·wp+q + off(ci, ki, kj), off = ci·plane + ki·wp + kj,
// so a run of flat positions p = r·wp+q (q < wp, the q ≥ ow among them
// discarded) is one stride through memory for every tap. The taps'
// byte offsets come from a table.

// TAP24 is one tap for the 4×24 tile: three input vectors at the tap's
// offset AX, four broadcast weights, twelve FMAs.
#define TAP24 \
	VMOVUPS      (DI)(AX*1), Y12; \
	VMOVUPS      32(DI)(AX*1), Y13; \
	VMOVUPS      64(DI)(AX*1), Y14; \
	VBROADCASTSS (BX), Y15; \
	VFMADD231PS  Y12, Y15, Y0; \
	VFMADD231PS  Y13, Y15, Y1; \
	VFMADD231PS  Y14, Y15, Y2; \
	VBROADCASTSS 4(BX), Y15; \
	VFMADD231PS  Y12, Y15, Y3; \
	VFMADD231PS  Y13, Y15, Y4; \
	VFMADD231PS  Y14, Y15, Y5; \
	VBROADCASTSS 8(BX), Y15; \
	VFMADD231PS  Y12, Y15, Y6; \
	VFMADD231PS  Y13, Y15, Y7; \
	VFMADD231PS  Y14, Y15, Y8; \
	VBROADCASTSS 12(BX), Y15; \
	VFMADD231PS  Y12, Y15, Y9; \
	VFMADD231PS  Y13, Y15, Y10; \
	VFMADD231PS  Y14, Y15, Y11; \
	ADDQ         R11, BX

// func convTapsO4W24(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)
// y[j·ystride + i] = bias[j] + Σ_t w[t·wtap + j]·x[taps[t]/4 + i], i < 24,
// j < 4, summed over the ntaps taps in order, from the bias: 12 FMAs for
// 8 loads (a 4×16 tile, as the 3×3 kernels', measured 1.5–1.7× slower on
// LeNet-5's layers, does 8 for 7).
TEXT ·convTapsO4W24(SB), NOSPLIT, $0-64
	MOVQ         y+0(FP), DX
	MOVQ         ystride+8(FP), R12
	SHLQ         $2, R12
	MOVQ         x+16(FP), DI
	MOVQ         taps+24(FP), SI
	MOVQ         ntaps+32(FP), CX
	MOVQ         w+40(FP), BX
	MOVQ         wtap+48(FP), R11
	SHLQ         $2, R11
	MOVQ         bias+56(FP), AX
	VBROADCASTSS (AX), Y0
	VMOVAPS      Y0, Y1
	VMOVAPS      Y0, Y2
	VBROADCASTSS 4(AX), Y3
	VMOVAPS      Y3, Y4
	VMOVAPS      Y3, Y5
	VBROADCASTSS 8(AX), Y6
	VMOVAPS      Y6, Y7
	VMOVAPS      Y6, Y8
	VBROADCASTSS 12(AX), Y9
	VMOVAPS      Y9, Y10
	VMOVAPS      Y9, Y11
	TESTQ        CX, CX
	JZ           t24store

t24loop:
	MOVQ (SI), AX
	TAP24
	ADDQ $8, SI
	DECQ CX
	JNZ  t24loop

t24store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Y3, (DX)
	VMOVUPS Y4, 32(DX)
	VMOVUPS Y5, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VMOVUPS Y8, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Y9, (DX)
	VMOVUPS Y10, 32(DX)
	VMOVUPS Y11, 64(DX)
	VZEROUPPER
	RET

// DWT is DW12 for the k×k kernel: the input at p + the 3 taps' offsets
// (R8, R9, R10), the fourth gradient at SI+DX.
#define DWT DW12((DI)(R8*1), (DI)(R9*1), (DI)(R10*1), DX)

// func convTapsDW(acc *float32, dy *float32, dystride int, x *float32, taps *int, npix, n, dysample, xsample int)
// acc[(j*3+t)*8 + lane] = the lane's share of Σ over n samples and the
// npix flat positions p (a multiple of 8) of dy[s][j][p] ·
// x[s][p + taps[t]/4], j < 4, t < 3 (dy: output channel o0's wide plane,
// dystride floats between channels; dysample, xsample: floats between
// samples).
TEXT ·convTapsDW(SB), NOSPLIT, $0-72
	MOVQ   dystride+16(FP), R12
	SHLQ   $2, R12
	LEAQ   (R12)(R12*1), R13
	LEAQ   (R13)(R12*1), DX
	MOVQ   taps+32(FP), AX
	MOVQ   (AX), R8
	MOVQ   8(AX), R9
	MOVQ   16(AX), R10
	ZERO12
	XORQ   R11, R11 // sample

dwtsample:
	CMPQ  R11, n+48(FP)
	JAE   dwtstore
	SAMPLE_PTRS(dysample+56(FP), xsample+64(FP))
	MOVQ  npix+40(FP), BX
	TESTQ BX, BX
	JZ    dwtnext

dwtpix:
	DWT
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, BX
	JNZ  dwtpix

dwtnext:
	INCQ R11
	JMP  dwtsample

dwtstore:
	MOVQ    acc+0(FP), AX
	STORE12(AX)
	VZEROUPPER
	RET
