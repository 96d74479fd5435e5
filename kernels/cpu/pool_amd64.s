//go:build !purego

#include "textflag.h"

// The 2×2, stride-2 max pool over 8 outputs of a row (AVX2), see conv.go:
// r0 and r1 point at the 16 pixels of the window rows, 2·x0 in. Both
// return false, having written nothing, when a pixel is NaN (conv.go's
// scalar rule then takes the block).

// POOL22_LOAD loads the two rows' 16 pixels into Y0, Y1 (row 0) and Y2,
// Y3 (row 1), jumps to nan when one is NaN, and leaves each window's
// pixels in Y6 (top left, a), Y7 (top right, b), Y8 (c), Y9 (d), in the
// order E = shuf(x0, x2, x8, x10 | x4, x6, x12, x14): windows 0, 1, 4, 5 |
// 2, 3, 6, 7 (VPERMPD $0xD8 swaps that order and the natural one).
#define POOL22_LOAD(nan) \
	VMOVUPS   (SI), Y0; \
	VMOVUPS   32(SI), Y1; \
	VMOVUPS   (DI), Y2; \
	VMOVUPS   32(DI), Y3; \
	VCMPPS    $3, Y1, Y0, Y4; \
	VCMPPS    $3, Y3, Y2, Y5; \
	VORPS     Y5, Y4, Y4; \
	VMOVMSKPS Y4, AX; \
	TESTL     AX, AX; \
	JNZ       nan; \
	VSHUFPS   $0x88, Y1, Y0, Y6; \
	VSHUFPS   $0xDD, Y1, Y0, Y7; \
	VSHUFPS   $0x88, Y3, Y2, Y8; \
	VSHUFPS   $0xDD, Y3, Y2, Y9

// func maxPool22x8(y, r0, r1 *float32) bool
// y[i] = the first maximum of window i (a, b, c, d in row-major order):
// VMAXPS X, Y, D keeps X when the two are equal (Intel's MAXPS returns its
// second source then), so D = X unless Y > X.
TEXT ·maxPool22x8(SB), NOSPLIT, $0-25
	MOVQ y+0(FP), DX
	MOVQ r0+8(FP), SI
	MOVQ r1+16(FP), DI
	POOL22_LOAD(mpnan)
	VMAXPS  Y6, Y7, Y10
	VMAXPS  Y8, Y9, Y11
	VMAXPS  Y10, Y11, Y12
	VPERMPD $0xD8, Y12, Y12
	VMOVUPS Y12, (DX)
	VZEROUPPER
	MOVB    $1, ret+24(FP)
	RET

mpnan:
	VZEROUPPER
	MOVB $0, ret+24(FP)
	RET

// func maxPoolGrad22x8(d0, d1, r0, r1, dy *float32) bool
// Window i's four pixels of d0 (row 0) and d1 (row 1) = dy[i] + 0 at the
// first of them equal to the window's maximum, +0 at the others.
TEXT ·maxPoolGrad22x8(SB), NOSPLIT, $0-41
	MOVQ r0+16(FP), SI
	MOVQ r1+24(FP), DI
	POOL22_LOAD(mgnan)
	MOVQ      dy+32(FP), AX
	VMOVUPS   (AX), Y10
	VPERMPD   $0xD8, Y10, Y10 // dy in the windows' order
	VXORPS    Y11, Y11, Y11
	VADDPS    Y11, Y10, Y10   // g = dy + 0
	VMAXPS    Y6, Y7, Y12
	VMAXPS    Y8, Y9, Y13
	VMAXPS    Y12, Y13, Y12   // m
	VCMPPS    $0, Y12, Y6, Y0 // fa = a == m
	VCMPPS    $0, Y12, Y7, Y1
	VANDNPS   Y1, Y0, Y1      // fb = b == m and not fa
	VORPS     Y0, Y1, Y4      // fa | fb
	VCMPPS    $0, Y12, Y8, Y2
	VANDNPS   Y2, Y4, Y2      // fc
	VORPS     Y4, Y2, Y4      // fa | fb | fc
	VANDPS    Y10, Y0, Y0     // ga
	VANDPS    Y10, Y1, Y1     // gb
	VANDPS    Y10, Y2, Y2     // gc
	VANDNPS   Y10, Y4, Y3     // gd
	// Unpacking (a, b) and (c, d) lane by lane undoes the shuffle:
	// the rows' 16 pixels in order.
	VUNPCKLPS Y1, Y0, Y5
	VUNPCKHPS Y1, Y0, Y6
	VUNPCKLPS Y3, Y2, Y7
	VUNPCKHPS Y3, Y2, Y8
	MOVQ      d0+0(FP), AX
	VMOVUPS   Y5, (AX)
	VMOVUPS   Y6, 32(AX)
	MOVQ      d1+8(FP), AX
	VMOVUPS   Y7, (AX)
	VMOVUPS   Y8, 32(AX)
	VZEROUPPER
	MOVB      $1, ret+40(FP)
	RET

mgnan:
	VZEROUPPER
	MOVB $0, ret+40(FP)
	RET

// The same over 4 outputs (SSE registers: the shuffles leave the windows
// in order). POOL22_LOAD4 loads the rows' 8 pixels and leaves a, b, c, d
// in X6 … X9, or jumps to nan.
#define POOL22_LOAD4(nan) \
	VMOVUPS   (SI), X0; \
	VMOVUPS   16(SI), X1; \
	VMOVUPS   (DI), X2; \
	VMOVUPS   16(DI), X3; \
	VCMPPS    $3, X1, X0, X4; \
	VCMPPS    $3, X3, X2, X5; \
	VORPS     X5, X4, X4; \
	VMOVMSKPS X4, AX; \
	TESTL     AX, AX; \
	JNZ       nan; \
	VSHUFPS   $0x88, X1, X0, X6; \
	VSHUFPS   $0xDD, X1, X0, X7; \
	VSHUFPS   $0x88, X3, X2, X8; \
	VSHUFPS   $0xDD, X3, X2, X9

// func maxPool22x4(y, r0, r1 *float32) bool
TEXT ·maxPool22x4(SB), NOSPLIT, $0-25
	MOVQ y+0(FP), DX
	MOVQ r0+8(FP), SI
	MOVQ r1+16(FP), DI
	POOL22_LOAD4(mp4nan)
	VMAXPS  X6, X7, X10
	VMAXPS  X8, X9, X11
	VMAXPS  X10, X11, X12
	VMOVUPS X12, (DX)
	MOVB    $1, ret+24(FP)
	RET

mp4nan:
	MOVB $0, ret+24(FP)
	RET

// func maxPoolGrad22x4(d0, d1, r0, r1, dy *float32) bool
TEXT ·maxPoolGrad22x4(SB), NOSPLIT, $0-41
	MOVQ r0+16(FP), SI
	MOVQ r1+24(FP), DI
	POOL22_LOAD4(mg4nan)
	MOVQ      dy+32(FP), AX
	VMOVUPS   (AX), X10
	VXORPS    X11, X11, X11
	VADDPS    X11, X10, X10
	VMAXPS    X6, X7, X12
	VMAXPS    X8, X9, X13
	VMAXPS    X12, X13, X12
	VCMPPS    $0, X12, X6, X0
	VCMPPS    $0, X12, X7, X1
	VANDNPS   X1, X0, X1
	VORPS     X0, X1, X4
	VCMPPS    $0, X12, X8, X2
	VANDNPS   X2, X4, X2
	VORPS     X4, X2, X4
	VANDPS    X10, X0, X0
	VANDPS    X10, X1, X1
	VANDPS    X10, X2, X2
	VANDNPS   X10, X4, X3
	VUNPCKLPS X1, X0, X5
	VUNPCKHPS X1, X0, X6
	VUNPCKLPS X3, X2, X7
	VUNPCKHPS X3, X2, X8
	MOVQ      d0+0(FP), AX
	VMOVUPS   X5, (AX)
	VMOVUPS   X6, 16(AX)
	MOVQ      d1+8(FP), AX
	VMOVUPS   X7, (AX)
	VMOVUPS   X8, 16(AX)
	MOVB      $1, ret+40(FP)
	RET

mg4nan:
	MOVB $0, ret+40(FP)
	RET
