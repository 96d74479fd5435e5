//go:build !purego

#include "textflag.h"

// GELU (erf form) and exp over n float32s, n a multiple of 8, 8 per
// iteration with AVX2 and FMA. The arithmetic is gelu.go's geluf,
// geluGradf and expf, operation for operation (FMA where they use fma32),
// so the assembly and the Go loops agree within an ulp.

DATA gc<>+0(SB)/4, $0x42b00000  // expHi 88
DATA gc<>+4(SB)/4, $0xc2ae0000  // expLo -87
DATA gc<>+8(SB)/4, $0x3fb8aa3b  // log2(e)
DATA gc<>+12(SB)/4, $0x3f318000 // ln2 high part
DATA gc<>+16(SB)/4, $0xb95e8083 // ln2 low part
DATA gc<>+20(SB)/4, $0x39506967 // exp's polynomial, p0 … p5
DATA gc<>+24(SB)/4, $0x3ab743ce
DATA gc<>+28(SB)/4, $0x3c088908
DATA gc<>+32(SB)/4, $0x3d2aa9c1
DATA gc<>+36(SB)/4, $0x3e2aaaaa
DATA gc<>+40(SB)/4, $0x3f000000
DATA gc<>+44(SB)/4, $0x3f800000 // 1
DATA gc<>+48(SB)/4, $0x40000000 // 2
DATA gc<>+52(SB)/4, $0x3f000000 // 0.5
DATA gc<>+56(SB)/4, $0x3f3504f3 // 1/√2
DATA gc<>+60(SB)/4, $0x3ea7ba05 // erf's p (Abramowitz and Stegun 7.1.26)
DATA gc<>+64(SB)/4, $0x3e827906 // a1 … a5
DATA gc<>+68(SB)/4, $0xbe91a98e
DATA gc<>+72(SB)/4, $0x3fb5f0e3
DATA gc<>+76(SB)/4, $0xbfba00e3
DATA gc<>+80(SB)/4, $0x3f87dc22
DATA gc<>+84(SB)/4, $0x3ecc422a // 1/√(2π)
DATA gc<>+88(SB)/4, $127        // the exponent's bias
DATA gc<>+92(SB)/4, $0x7fffffff // |x|
DATA gc<>+96(SB)/4, $0x80000000 // the sign bit
GLOBL gc<>(SB), RODATA|NOPTR, $100

// EXPF sets V = e^V (V clamped to [-87, 88]; a NaN stays NaN: MINPS and
// MAXPS return their second source where one is NaN); T1, T2, T3 are
// scratch.
#define EXPF(V, T1, T2, T3) \
	VBROADCASTSS gc<>+0(SB), T1  \
	VMINPS       V, T1, V        \
	VBROADCASTSS gc<>+4(SB), T1  \
	VMAXPS       V, T1, V        \
	VBROADCASTSS gc<>+8(SB), T1  \
	VMULPS       T1, V, T2       \
	VROUNDPS     $0, T2, T2      \
	VBROADCASTSS gc<>+12(SB), T1 \
	VFNMADD231PS T1, T2, V       \
	VBROADCASTSS gc<>+16(SB), T1 \
	VFNMADD231PS T1, T2, V       \
	VBROADCASTSS gc<>+20(SB), T3 \
	VBROADCASTSS gc<>+24(SB), T1 \
	VFMADD213PS  T1, V, T3       \
	VBROADCASTSS gc<>+28(SB), T1 \
	VFMADD213PS  T1, V, T3       \
	VBROADCASTSS gc<>+32(SB), T1 \
	VFMADD213PS  T1, V, T3       \
	VBROADCASTSS gc<>+36(SB), T1 \
	VFMADD213PS  T1, V, T3       \
	VBROADCASTSS gc<>+40(SB), T1 \
	VFMADD213PS  T1, V, T3       \
	VMULPS       V, V, T1        \
	VFMADD213PS  V, T1, T3       \
	VBROADCASTSS gc<>+44(SB), T1 \
	VADDPS       T1, T3, T3      \
	VCVTPS2DQ    T2, T2          \
	VPBROADCASTD gc<>+88(SB), T1 \
	VPADDD       T1, T2, T2      \
	VPSLLD       $23, T2, T2     \
	VMULPS       T2, T3, V

// PHI2 sets P = 1 + erf(x/√2) and E = e^(−x²/2) for X = x; T1 … T3
// are scratch.
#define PHI2(X, P, E, T1, T2, T3) \
	VBROADCASTSS gc<>+92(SB), T1 \
	VANDPS       T1, X, P        \
	VBROADCASTSS gc<>+56(SB), T1 \
	VMULPS       T1, P, P        \
	VMULPS       P, P, E         \
	VBROADCASTSS gc<>+96(SB), T1 \
	VXORPS       T1, E, E        \
	EXPF(E, T1, T2, T3)          \
	VBROADCASTSS gc<>+44(SB), T2 \
	VBROADCASTSS gc<>+60(SB), T1 \
	VFMADD213PS  T2, T1, P       \
	VDIVPS       P, T2, P        \
	VBROADCASTSS gc<>+80(SB), T3 \
	VBROADCASTSS gc<>+76(SB), T1 \
	VFMADD213PS  T1, P, T3       \
	VBROADCASTSS gc<>+72(SB), T1 \
	VFMADD213PS  T1, P, T3       \
	VBROADCASTSS gc<>+68(SB), T1 \
	VFMADD213PS  T1, P, T3       \
	VBROADCASTSS gc<>+64(SB), T1 \
	VFMADD213PS  T1, P, T3       \
	VMULPS       P, T3, T3       \
	VMULPS       E, T3, T3       \
	VBROADCASTSS gc<>+48(SB), P  \
	VSUBPS       T3, P, P        \
	VXORPS       T1, T1, T1      \
	VCMPPS       $1, T1, X, T1   \
	VBLENDVPS    T1, T3, P, P

// func geluAVX2(y, x *float32, n int)
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX

gelu8:
	CMPQ         CX, $8
	JB           geludone
	VMOVUPS      (SI), Y0
	PHI2(Y0, Y1, Y2, Y3, Y4, Y5)
	VMULPS       Y1, Y0, Y1
	VBROADCASTSS gc<>+52(SB), Y3
	VMULPS       Y3, Y1, Y1
	VMOVUPS      Y1, (DI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	SUBQ         $8, CX
	JMP          gelu8

geludone:
	VZEROUPPER
	RET

// func geluGradAVX2(dx, dy, x *float32, n int)
TEXT ·geluGradAVX2(SB), NOSPLIT, $0-32
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX

grad8:
	CMPQ         CX, $8
	JB           graddone
	VMOVUPS      (SI), Y0
	PHI2(Y0, Y1, Y2, Y3, Y4, Y5)
	VMULPS       Y2, Y0, Y6
	VBROADCASTSS gc<>+84(SB), Y3
	VMULPS       Y3, Y6, Y6
	VBROADCASTSS gc<>+52(SB), Y3
	VFMADD231PS  Y3, Y1, Y6
	VMOVUPS      (DX), Y3
	VMULPS       Y3, Y6, Y6
	VMOVUPS      Y6, (DI)
	ADDQ         $32, DI
	ADDQ         $32, DX
	ADDQ         $32, SI
	SUBQ         $8, CX
	JMP          grad8

graddone:
	VZEROUPPER
	RET

// func expAVX2(y, x *float32, n int)
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX

exp8:
	CMPQ    CX, $8
	JB      expdone
	VMOVUPS (SI), Y0
	EXPF(Y0, Y1, Y2, Y3)
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     exp8

expdone:
	VZEROUPPER
	RET
