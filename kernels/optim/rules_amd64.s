//go:build !purego && !amd64.v3

#include "textflag.h"

// The rules over 8 floats at a time. Each computes, per element, the same
// operations in the same order as the scalar rule in rules.go, without
// fusing (VMULPS, VADDPS, VSUBPS round exactly as the scalar float32
// operations do), so the results are bit for bit the scalar loop's. Go
// fuses a*b+c into an FMA on amd64 only from GOAMD64=v3, where these files
// are not built (rules_other.go). The caller handles the n%8 tail with the
// scalar rule. (Moved here from kernels/cpu, which had SGD and Momentum,
// so that the parameter server's updates use them too.)

// func sgdAVX2(w, grad *float32, n int, rate, decay float32)
// w = w - lr*(g + wd*w)
TEXT ·sgdAVX2(SB), NOSPLIT, $0-32
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS rate+24(FP), Y14
	VBROADCASTSS decay+28(FP), Y15
sgd16:
	CMPQ    CX, $16
	JL      sgd8
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMULPS  Y15, Y0, Y2   // wd*w
	VMULPS  Y15, Y1, Y3
	VADDPS  (SI), Y2, Y2  // g + wd*w
	VADDPS  32(SI), Y3, Y3
	VMULPS  Y14, Y2, Y2   // lr*(...)
	VMULPS  Y14, Y3, Y3
	VSUBPS  Y2, Y0, Y0    // w - lr*(...)
	VSUBPS  Y3, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     sgd16
sgd8:
	CMPQ    CX, $8
	JL      sgddone
	VMOVUPS (DI), Y0
	VMULPS  Y15, Y0, Y2
	VADDPS  (SI), Y2, Y2
	VMULPS  Y14, Y2, Y2
	VSUBPS  Y2, Y0, Y0
	VMOVUPS Y0, (DI)
sgddone:
	VZEROUPPER
	RET

// func momentumAVX2(w, grad, v *float32, n int, rate, mom, decay float32)
// vi = mu*v + (g + wd*w); v = vi; w = w - lr*vi
TEXT ·momentumAVX2(SB), NOSPLIT, $0-44
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         v+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS rate+32(FP), Y13
	VBROADCASTSS mom+36(FP), Y14
	VBROADCASTSS decay+40(FP), Y15
mom8:
	CMPQ    CX, $8
	JL      momdone
	VMOVUPS (DI), Y0      // w
	VMULPS  Y15, Y0, Y1   // wd*w
	VADDPS  (SI), Y1, Y1  // g + wd*w
	VMOVUPS (DX), Y2      // v
	VMULPS  Y14, Y2, Y2   // mu*v
	VADDPS  Y1, Y2, Y2    // mu*v + (g + wd*w)
	VMOVUPS Y2, (DX)
	VMULPS  Y13, Y2, Y2   // lr*vi
	VSUBPS  Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     mom8
momdone:
	VZEROUPPER
	RET

// func larsAVX2(w, grad, v *float32, n int, rate, mom, decay float32)
// vi = mu*v + rate*(g + wd*w); v = vi; w = w - vi (rate: the tensor's lr·trust)
TEXT ·larsAVX2(SB), NOSPLIT, $0-44
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         v+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS rate+32(FP), Y13
	VBROADCASTSS mom+36(FP), Y14
	VBROADCASTSS decay+40(FP), Y15
lars8:
	CMPQ    CX, $8
	JL      larsdone
	VMOVUPS (DI), Y0      // w
	VMULPS  Y15, Y0, Y1   // wd*w
	VADDPS  (SI), Y1, Y1  // g + wd*w
	VMULPS  Y13, Y1, Y1   // rate*(g + wd*w)
	VMOVUPS (DX), Y2      // v
	VMULPS  Y14, Y2, Y2   // mu*v
	VADDPS  Y1, Y2, Y2    // mu*v + rate*(g + wd*w)
	VMOVUPS Y2, (DX)
	VSUBPS  Y2, Y0, Y0    // w - vi
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     lars8
larsdone:
	VZEROUPPER
	RET

// func adagradAVX2(w, grad, h *float32, n int, rate, eps, decay float32)
// gi = g + wd*w; hi = h + gi*gi; h = hi; w = w - (lr*gi)/(sqrt(hi) + eps).
// VSQRTPS is the correctly rounded float32 square root, which is what the
// scalar rule's float32(math.Sqrt(float64(hi))) is (a float64 square root
// rounded to float32 is never double-rounded wrong).
TEXT ·adagradAVX2(SB), NOSPLIT, $0-44
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         h+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS rate+32(FP), Y13
	VBROADCASTSS eps+36(FP), Y14
	VBROADCASTSS decay+40(FP), Y15
ada8:
	CMPQ    CX, $8
	JL      adadone
	VMOVUPS (DI), Y0      // w
	VMULPS  Y15, Y0, Y1   // wd*w
	VADDPS  (SI), Y1, Y1  // gi = g + wd*w
	VMULPS  Y1, Y1, Y2    // gi*gi
	VADDPS  (DX), Y2, Y2  // hi = h + gi*gi
	VMOVUPS Y2, (DX)
	VSQRTPS Y2, Y2        // sqrt(hi)
	VADDPS  Y14, Y2, Y2   // + eps
	VMULPS  Y13, Y1, Y1   // lr*gi
	VDIVPS  Y2, Y1, Y1    // (lr*gi)/(sqrt(hi)+eps)
	VSUBPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     ada8
adadone:
	VZEROUPPER
	RET

// func adamAVX2(w, grad, s *float32, n int, b1, omb1, b2, omb2, step, bc2s, eps, wdOrDecay float32, decoupled int)
// Eight weights at a time, their moments interleaved in s (16 floats):
// the same float32 operations, in the same order, as adamAt.
TEXT ·adamAVX2(SB), NOSPLIT, $0-72
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         s+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS b1+32(FP), Y8
	VBROADCASTSS omb1+36(FP), Y9
	VBROADCASTSS b2+40(FP), Y10
	VBROADCASTSS omb2+44(FP), Y11
	VBROADCASTSS step+48(FP), Y12
	VBROADCASTSS bc2s+52(FP), Y13
	VBROADCASTSS eps+56(FP), Y14
	VBROADCASTSS wdOrDecay+60(FP), Y15
	MOVQ         decoupled+64(FP), R8
adam8:
	CMPQ    CX, $8
	JL      adamdone
	VMOVUPS (DI), Y0           // w
	VMOVUPS (SI), Y1           // g
	CMPQ    R8, $0
	JEQ     adamcoupled
	VMULPS  Y15, Y0, Y0        // w = w*decay (AdamW)
	JMP     adammoments
adamcoupled:
	VMULPS  Y15, Y0, Y6        // wd*w
	VADDPS  Y6, Y1, Y1         // g = g + wd*w (Adam)
adammoments:
	VMOVUPS (DX), Y2           // m0 v0 m1 v1 | m2 v2 m3 v3
	VMOVUPS 32(DX), Y3         // m4 v4 m5 v5 | m6 v6 m7 v7
	VSHUFPS $0x88, Y3, Y2, Y4  // m0 m1 m4 m5 | m2 m3 m6 m7
	VSHUFPS $0xDD, Y3, Y2, Y5  // v0 v1 v4 v5 | v2 v3 v6 v7
	VPERMPD $0xD8, Y4, Y4      // m0..m7
	VPERMPD $0xD8, Y5, Y5      // v0..v7
	VMULPS  Y8, Y4, Y4         // b1*m
	VMULPS  Y9, Y1, Y6         // omb1*g
	VADDPS  Y6, Y4, Y4         // m = b1*m + omb1*g
	VMULPS  Y10, Y5, Y5        // b2*v
	VMULPS  Y11, Y1, Y6        // omb2*g
	VMULPS  Y1, Y6, Y6         // (omb2*g)*g
	VADDPS  Y6, Y5, Y5         // v = b2*v + omb2*g*g
	VSQRTPS Y5, Y6             // sqrt(v)
	VDIVPS  Y13, Y6, Y6        // sqrt(v)/bc2s
	VADDPS  Y14, Y6, Y6        // denom = … + eps
	VDIVPS  Y6, Y4, Y7         // m/denom
	VMULPS  Y12, Y7, Y7        // step*(m/denom)
	VSUBPS  Y7, Y0, Y0         // w - step*(m/denom)
	VMOVUPS Y0, (DI)
	VPERMPD $0xD8, Y4, Y4      // m0 m1 m4 m5 | m2 m3 m6 m7
	VPERMPD $0xD8, Y5, Y5      // v0 v1 v4 v5 | v2 v3 v6 v7
	VUNPCKLPS Y5, Y4, Y2       // m0 v0 m1 v1 | m2 v2 m3 v3
	VUNPCKHPS Y5, Y4, Y3       // m4 v4 m5 v5 | m6 v6 m7 v7
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $64, DX
	SUBQ    $8, CX
	JMP     adam8
adamdone:
	VZEROUPPER
	RET
