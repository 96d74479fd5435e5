//go:build !purego

#include "textflag.h"

// The k×k micro-kernels of direct_amd64.s on AVX-512 (AVX512F, DQ's
// VBROADCASTF32X8 and VINSERTF32X8, VL's 256-bit moves to Y25): the same
// sums in the same order, each lane of a 16-float register doing what a
// lane of an 8-float one does there, so that their results are bit for
// bit those of the AVX2 kernels (which TestDirectZ checks).

// TAPS_PROLOGUE loads the forward kernels' arguments: DX the tile's
// output, R12 the byte stride between its channels, DI the input, SI the
// taps table, CX their count, BX the weights, R11 a tap's weights' byte
// stride, AX the bias. (The argument macros stand before the first TEXT,
// where go vet's frame check reads no function's names into them.)
#define TAPS_PROLOGUE \
	MOVQ y+0(FP), DX; \
	MOVQ ystride+8(FP), R12; \
	SHLQ $2, R12; \
	MOVQ x+16(FP), DI; \
	MOVQ taps+24(FP), SI; \
	MOVQ ntaps+32(FP), CX; \
	MOVQ w+40(FP), BX; \
	MOVQ wtap+48(FP), R11; \
	SHLQ $2, R11; \
	MOVQ bias+56(FP), AX

// ROW5_PROLOGUE loads the row kernels' arguments (byte strides: R12
// between output channels, R13 two, DX three; AX the lanes, R11 the rows
// table, BX the row count, tested); ROW5_RUN points SI and CX at output
// channels 0 and 4's gradients, DI at the input and BX at the run's
// pixels, tested.
#define ROW5_PROLOGUE \
	MOVQ  dystride+16(FP), R12; \
	SHLQ  $2, R12; \
	LEAQ  (R12)(R12*1), R13; \
	LEAQ  (R13)(R12*1), DX; \
	MOVQ  acc+0(FP), AX; \
	MOVQ  rows+32(FP), R11; \
	MOVQ  nrows+40(FP), BX; \
	TESTQ BX, BX

#define ROW5_RUN \
	MOVQ  dy+8(FP), SI; \
	LEAQ  (SI)(R12*4), CX; \
	MOVQ  x+24(FP), DI; \
	MOVQ  npix+48(FP), BX; \
	TESTQ BX, BX

// TAP48 is one tap for the 4×48 tile: three input vectors at the tap's
// offset AX, four broadcast weights, twelve FMAs.
#define TAP48 \
	VMOVUPS      (DI)(AX*1), Z12; \
	VMOVUPS      64(DI)(AX*1), Z13; \
	VMOVUPS      128(DI)(AX*1), Z14; \
	VBROADCASTSS (BX), Z15; \
	VFMADD231PS  Z12, Z15, Z0; \
	VFMADD231PS  Z13, Z15, Z1; \
	VFMADD231PS  Z14, Z15, Z2; \
	VBROADCASTSS 4(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z3; \
	VFMADD231PS  Z13, Z15, Z4; \
	VFMADD231PS  Z14, Z15, Z5; \
	VBROADCASTSS 8(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z6; \
	VFMADD231PS  Z13, Z15, Z7; \
	VFMADD231PS  Z14, Z15, Z8; \
	VBROADCASTSS 12(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z9; \
	VFMADD231PS  Z13, Z15, Z10; \
	VFMADD231PS  Z14, Z15, Z11; \
	ADDQ         R11, BX

// func convTapsO4W48(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)
// convTapsO4W24 over 48 pixels: y[j·ystride + i] = bias[j] + Σ_t
// w[t·wtap + j]·x[taps[t]/4 + i], i < 48, j < 4, summed over the ntaps
// taps in order, from the bias.
TEXT ·convTapsO4W48(SB), NOSPLIT, $0-64
	TAPS_PROLOGUE
	VBROADCASTSS (AX), Z0
	VMOVAPS      Z0, Z1
	VMOVAPS      Z0, Z2
	VBROADCASTSS 4(AX), Z3
	VMOVAPS      Z3, Z4
	VMOVAPS      Z3, Z5
	VBROADCASTSS 8(AX), Z6
	VMOVAPS      Z6, Z7
	VMOVAPS      Z6, Z8
	VBROADCASTSS 12(AX), Z9
	VMOVAPS      Z9, Z10
	VMOVAPS      Z9, Z11
	TESTQ        CX, CX
	JZ           t48store

t48loop:
	MOVQ (SI), AX
	TAP48
	ADDQ $8, SI
	DECQ CX
	JNZ  t48loop

t48store:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	ADDQ    R12, DX
	VMOVUPS Z3, (DX)
	VMOVUPS Z4, 64(DX)
	VMOVUPS Z5, 128(DX)
	ADDQ    R12, DX
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	VMOVUPS Z8, 128(DX)
	ADDQ    R12, DX
	VMOVUPS Z9, (DX)
	VMOVUPS Z10, 64(DX)
	VMOVUPS Z11, 128(DX)
	VZEROUPPER
	RET

// TAP32 is one tap for the 6×32 tile: two input vectors at the tap's
// offset AX, six broadcast weights, twelve FMAs.
#define TAP32 \
	VMOVUPS      (DI)(AX*1), Z12; \
	VMOVUPS      64(DI)(AX*1), Z13; \
	VBROADCASTSS (BX), Z14; \
	VFMADD231PS  Z12, Z14, Z0; \
	VFMADD231PS  Z13, Z14, Z1; \
	VBROADCASTSS 4(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z2; \
	VFMADD231PS  Z13, Z15, Z3; \
	VBROADCASTSS 8(BX), Z14; \
	VFMADD231PS  Z12, Z14, Z4; \
	VFMADD231PS  Z13, Z14, Z5; \
	VBROADCASTSS 12(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z6; \
	VFMADD231PS  Z13, Z15, Z7; \
	VBROADCASTSS 16(BX), Z14; \
	VFMADD231PS  Z12, Z14, Z8; \
	VFMADD231PS  Z13, Z14, Z9; \
	VBROADCASTSS 20(BX), Z15; \
	VFMADD231PS  Z12, Z15, Z10; \
	VFMADD231PS  Z13, Z15, Z11; \
	ADDQ         R11, BX

// func convTapsO6W32(y *float32, ystride int, x *float32, taps *int, ntaps int, w *float32, wtap int, bias *float32)
// convTapsO4W48 for 6 output channels over 32 pixels (j < 6, i < 32):
// the tile for layers of 6, 12, … output channels (LeNet-5's conv1 and
// conv2's input gradient), which 4-channel tiles would pad.
TEXT ·convTapsO6W32(SB), NOSPLIT, $0-64
	TAPS_PROLOGUE
	VBROADCASTSS (AX), Z0
	VMOVAPS      Z0, Z1
	VBROADCASTSS 4(AX), Z2
	VMOVAPS      Z2, Z3
	VBROADCASTSS 8(AX), Z4
	VMOVAPS      Z4, Z5
	VBROADCASTSS 12(AX), Z6
	VMOVAPS      Z6, Z7
	VBROADCASTSS 16(AX), Z8
	VMOVAPS      Z8, Z9
	VBROADCASTSS 20(AX), Z10
	VMOVAPS      Z10, Z11
	TESTQ        CX, CX
	JZ           t32store

t32loop:
	MOVQ (SI), AX
	TAP32
	ADDQ $8, SI
	DECQ CX
	JNZ  t32loop

t32store:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Z8, (DX)
	VMOVUPS Z9, 64(DX)
	ADDQ    R12, DX
	VMOVUPS Z10, (DX)
	VMOVUPS Z11, 64(DX)
	VZEROUPPER
	RET

// DYPAIR loads output channels j and j+1's gradients at (lo) and (hi),
// 8 pixels each, into the low and high halves of register z (y its low
// half's name).
#define DYPAIR(lo, hi, y, z) \
	VMOVUPS       lo, y; \
	VINSERTF32X8  $1, hi, z, z

// DWZ is one 8-pixel step of convTapsDW8: the 3 taps' input vectors (8
// pixels, in both halves of Z12–Z14) and the gradients of 4 pairs of
// output channels (channels 0–3 at SI + 0, R12, R13, DX; 4–7 the same
// from CX), into 12 accumulators (pair p, tap t: Z(p*3+t), channel 2p in
// the low half, 2p+1 in the high one).
#define DWZ \
	VBROADCASTF32X8 (DI)(R8*1), Z12; \
	VBROADCASTF32X8 (DI)(R9*1), Z13; \
	VBROADCASTF32X8 (DI)(R10*1), Z14; \
	DYPAIR((SI), (SI)(R12*1), Y15, Z15); \
	VFMADD231PS     Z12, Z15, Z0; \
	VFMADD231PS     Z13, Z15, Z1; \
	VFMADD231PS     Z14, Z15, Z2; \
	DYPAIR((SI)(R13*1), (SI)(DX*1), Y15, Z15); \
	VFMADD231PS     Z12, Z15, Z3; \
	VFMADD231PS     Z13, Z15, Z4; \
	VFMADD231PS     Z14, Z15, Z5; \
	DYPAIR((CX), (CX)(R12*1), Y15, Z15); \
	VFMADD231PS     Z12, Z15, Z6; \
	VFMADD231PS     Z13, Z15, Z7; \
	VFMADD231PS     Z14, Z15, Z8; \
	DYPAIR((CX)(R13*1), (CX)(DX*1), Y15, Z15); \
	VFMADD231PS     Z12, Z15, Z9; \
	VFMADD231PS     Z13, Z15, Z10; \
	VFMADD231PS     Z14, Z15, Z11

// STORE12Z stores the 12 accumulators Z0–Z11 in 768 bytes at AX;
// LOAD12Z loads them back.
#define STORE12Z \
	VMOVUPS Z0, (AX); \
	VMOVUPS Z1, 64(AX); \
	VMOVUPS Z2, 128(AX); \
	VMOVUPS Z3, 192(AX); \
	VMOVUPS Z4, 256(AX); \
	VMOVUPS Z5, 320(AX); \
	VMOVUPS Z6, 384(AX); \
	VMOVUPS Z7, 448(AX); \
	VMOVUPS Z8, 512(AX); \
	VMOVUPS Z9, 576(AX); \
	VMOVUPS Z10, 640(AX); \
	VMOVUPS Z11, 704(AX)

#define LOAD12Z \
	VMOVUPS (AX), Z0; \
	VMOVUPS 64(AX), Z1; \
	VMOVUPS 128(AX), Z2; \
	VMOVUPS 192(AX), Z3; \
	VMOVUPS 256(AX), Z4; \
	VMOVUPS 320(AX), Z5; \
	VMOVUPS 384(AX), Z6; \
	VMOVUPS 448(AX), Z7; \
	VMOVUPS 512(AX), Z8; \
	VMOVUPS 576(AX), Z9; \
	VMOVUPS 640(AX), Z10; \
	VMOVUPS 704(AX), Z11

// func convTapsDW8(acc *float32, dy *float32, dystride int, x *float32, taps *int, groups, npix int)
// The weight gradient's sums for 8 output channels over one run of npix
// wide pixels (a multiple of 8) of one sample, for groups groups of 3
// taps: acc[g*192 + (p*3+t)*16 + h*8 + lane] += the lane's share of Σ
// over the run's positions q of dy[2p+h][q] · x[q + taps[3g+t]/4], p <
// 4, h < 2, t < 3, each lane adding the same products in the same order
// as convTapsDW's when the runs and samples come in order (dy: output
// channel o0's wide plane at the run, dystride floats between channels;
// x: the sample's padded image at the run). A run short enough for its
// gradients to stay in the L1 cache while every group reads them.
TEXT ·convTapsDW8(SB), NOSPLIT, $0-56
	MOVQ dystride+16(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*1), R13
	LEAQ (R13)(R12*1), DX
	MOVQ acc+0(FP), AX
	MOVQ taps+32(FP), R11
	MOVQ groups+40(FP), BX
	TESTQ BX, BX
	JZ   dwzdone

dwzgroup:
	MOVQ (R11), R8
	MOVQ 8(R11), R9
	MOVQ 16(R11), R10
	LOAD12Z
	MOVQ dy+8(FP), SI
	LEAQ (SI)(R12*4), CX
	MOVQ x+24(FP), DI
	MOVQ npix+48(FP), BX
	TESTQ BX, BX
	JZ   dwzstore

dwzpix:
	DWZ
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, CX
	SUBQ $8, BX
	JNZ  dwzpix

dwzstore:
	STORE12Z
	ADDQ $768, AX
	ADDQ $24, R11
	DECQ groups+40(FP)
	JNZ  dwzgroup

dwzdone:
	VZEROUPPER
	RET

// PAIR5 is one pair of output channels' gradients (lo, hi) times a kernel
// row's 5 taps (Z20–Z24) into the pair's accumulators a0–a4.
#define PAIR5(lo, hi, a0, a1, a2, a3, a4) \
	DYPAIR(lo, hi, Y25, Z25); \
	VFMADD231PS Z20, Z25, a0; \
	VFMADD231PS Z21, Z25, a1; \
	VFMADD231PS Z22, Z25, a2; \
	VFMADD231PS Z23, Z25, a3; \
	VFMADD231PS Z24, Z25, a4

// ROW5DW6 and ROW5DW8 are one 8-pixel step of convRow5DW6 and
// convRow5DW8: a kernel row's 5 taps' input vectors (8 pixels, in both
// halves of Z20–Z24, at R8 + 0, 4, … 16 bytes from DI) and the gradients
// of 3 or 4 pairs of output channels (as DWZ's), into 15 or 20
// accumulators (pair p, tap t: Z(p*5+t)).
#define ROW5DW6 \
	VBROADCASTF32X8 (DI)(R8*1), Z20; \
	VBROADCASTF32X8 4(DI)(R8*1), Z21; \
	VBROADCASTF32X8 8(DI)(R8*1), Z22; \
	VBROADCASTF32X8 12(DI)(R8*1), Z23; \
	VBROADCASTF32X8 16(DI)(R8*1), Z24; \
	PAIR5((SI), (SI)(R12*1), Z0, Z1, Z2, Z3, Z4); \
	PAIR5((SI)(R13*1), (SI)(DX*1), Z5, Z6, Z7, Z8, Z9); \
	PAIR5((CX), (CX)(R12*1), Z10, Z11, Z12, Z13, Z14)

#define ROW5DW8 \
	ROW5DW6; \
	PAIR5((CX)(R13*1), (CX)(DX*1), Z15, Z16, Z17, Z18, Z19)

// LOAD15Z/LOAD20Z and STORE15Z/STORE20Z move the accumulators Z0–Z14 or
// Z0–Z19 from or to AX.
#define LOAD15Z \
	LOAD12Z; \
	VMOVUPS 768(AX), Z12; \
	VMOVUPS 832(AX), Z13; \
	VMOVUPS 896(AX), Z14

#define LOAD20Z \
	LOAD15Z; \
	VMOVUPS 960(AX), Z15; \
	VMOVUPS 1024(AX), Z16; \
	VMOVUPS 1088(AX), Z17; \
	VMOVUPS 1152(AX), Z18; \
	VMOVUPS 1216(AX), Z19

#define STORE15Z \
	STORE12Z; \
	VMOVUPS Z12, 768(AX); \
	VMOVUPS Z13, 832(AX); \
	VMOVUPS Z14, 896(AX)

#define STORE20Z \
	STORE15Z; \
	VMOVUPS Z15, 960(AX); \
	VMOVUPS Z16, 1024(AX); \
	VMOVUPS Z17, 1088(AX); \
	VMOVUPS Z18, 1152(AX); \
	VMOVUPS Z19, 1216(AX)

// func convRow5DW6(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int)
// convTapsDW8's sums for 6 output channels and the 5 taps of each of
// nrows kernel rows of a 5×5 convolution (row r's taps at the byte
// offsets rows[r] + 0, 4, … 16): acc[r*240 + (p*5+t)*16 + h*8 + lane] +=
// the lane's share of Σ over the run's positions q of dy[2p+h][q] ·
// x[q + rows[r]/4 + t], p < 3, h < 2, t < 5; each tap's 8 pixels are
// loaded once for 6 channels, each pair's gradients once for 5 taps.
TEXT ·convRow5DW6(SB), NOSPLIT, $0-56
	ROW5_PROLOGUE
	JZ    r6done

r6row:
	MOVQ (R11), R8
	LOAD15Z
	ROW5_RUN
	JZ   r6store

r6pix:
	ROW5DW6
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, CX
	SUBQ $8, BX
	JNZ  r6pix

r6store:
	STORE15Z
	ADDQ $960, AX
	ADDQ $8, R11
	DECQ nrows+40(FP)
	JNZ  r6row

r6done:
	VZEROUPPER
	RET

// func convRow5DW8(acc *float32, dy *float32, dystride int, x *float32, rows *int, nrows, npix int)
// convTapsDW8's sums for 8 output channels and the 5 taps of each of
// nrows kernel rows of a 5×5 convolution (row r's taps at the byte
// offsets rows[r] + 0, 4, … 16): acc[r*320 + (p*5+t)*16 + h*8 + lane] +=
// the lane's share of Σ over the run's positions q of dy[2p+h][q] ·
// x[q + rows[r]/4 + t], p < 4, h < 2, t < 5; each tap's 8 pixels are
// loaded once for 8 channels, each pair's gradients once for 5 taps.
TEXT ·convRow5DW8(SB), NOSPLIT, $0-56
	ROW5_PROLOGUE
	JZ    r8done

r8row:
	MOVQ (R11), R8
	LOAD20Z
	ROW5_RUN
	JZ   r8store

r8pix:
	ROW5DW8
	ADDQ $32, DI
	ADDQ $32, SI
	ADDQ $32, CX
	SUBQ $8, BX
	JNZ  r8pix

r8store:
	STORE20Z
	ADDQ $1280, AX
	ADDQ $8, R11
	DECQ nrows+40(FP)
	JNZ  r8row

r8done:
	VZEROUPPER
	RET
