//go:build !purego && !amd64.v3

#include "textflag.h"

// The update rules of kernels/optim (rules.go) over n floats, n a multiple
// of 8, 16 per iteration while at least 16 are left. Each line is one of
// the Go expression's float32 operations, in its order and unfused (Go
// fuses a*b+c into an FMA on amd64 only from GOAMD64=v3, where these files
// are not built), so the results are optim's bit for bit.

// func momentumAVX2(w, grad, v *float32, n int, lr, mu, wd float32)
// vi = mu*v + (g + wd*w), then v = vi and w = w - lr*vi
TEXT ·momentumAVX2(SB), NOSPLIT, $0-44
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         v+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS lr+32(FP), Y13
	VBROADCASTSS mu+36(FP), Y14
	VBROADCASTSS wd+40(FP), Y15
	CMPQ         CX, $16
	JB           mom8

mom16:
	VMOVUPS (DI), Y0       // w
	VMOVUPS 32(DI), Y4
	VMULPS  Y0, Y15, Y1    // wd*w
	VMULPS  Y4, Y15, Y5
	VADDPS  (SI), Y1, Y1   // g + wd*w
	VADDPS  32(SI), Y5, Y5
	VMULPS  (DX), Y14, Y2  // mu*v
	VMULPS  32(DX), Y14, Y6
	VADDPS  Y1, Y2, Y2     // vi = mu*v + (g + wd*w)
	VADDPS  Y5, Y6, Y6
	VMOVUPS Y2, (DX)
	VMOVUPS Y6, 32(DX)
	VMULPS  Y2, Y13, Y3    // lr*vi
	VMULPS  Y6, Y13, Y7
	VSUBPS  Y3, Y0, Y0     // w - lr*vi
	VSUBPS  Y7, Y4, Y4
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, 32(DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	ADDQ    $64, DX
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     mom16

mom8:
	CMPQ    CX, $8
	JB      momdone
	VMOVUPS (DI), Y0
	VMULPS  Y0, Y15, Y1
	VADDPS  (SI), Y1, Y1
	VMULPS  (DX), Y14, Y2
	VADDPS  Y1, Y2, Y2
	VMOVUPS Y2, (DX)
	VMULPS  Y2, Y13, Y3
	VSUBPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)

momdone:
	VZEROUPPER
	RET

// func sgdAVX2(w, grad *float32, n int, lr, wd float32)
// w = w - lr*(g + wd*w)
TEXT ·sgdAVX2(SB), NOSPLIT, $0-32
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS lr+24(FP), Y13
	VBROADCASTSS wd+28(FP), Y15
	CMPQ         CX, $16
	JB           sgd8

sgd16:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y4
	VMULPS  Y0, Y15, Y1    // wd*w
	VMULPS  Y4, Y15, Y5
	VADDPS  (SI), Y1, Y1   // g + wd*w
	VADDPS  32(SI), Y5, Y5
	VMULPS  Y1, Y13, Y1    // lr*(g + wd*w)
	VMULPS  Y5, Y13, Y5
	VSUBPS  Y1, Y0, Y0     // w - lr*(...)
	VSUBPS  Y5, Y4, Y4
	VMOVUPS Y0, (DI)
	VMOVUPS Y4, 32(DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     sgd16

sgd8:
	CMPQ    CX, $8
	JB      sgddone
	VMOVUPS (DI), Y0
	VMULPS  Y0, Y15, Y1
	VADDPS  (SI), Y1, Y1
	VMULPS  Y1, Y13, Y1
	VSUBPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)

sgddone:
	VZEROUPPER
	RET
