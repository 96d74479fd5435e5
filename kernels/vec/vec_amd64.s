//go:build !purego

#include "textflag.h"

// func nonFiniteAVX2(x *float32, n int) int
// Returns the start of the first block (32 elements, or 8 in the tail)
// holding a NaN or ±Inf (exponent bits all ones), or n if none does.
TEXT ·nonFiniteAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	XORQ         AX, AX
	MOVQ         $0x7f800000, DX
	MOVQ         DX, X15
	VPBROADCASTD X15, Y15
	MOVQ         CX, BX
	SUBQ         $32, BX   // the last start of a whole 32-block

nf32:
	CMPQ      AX, BX
	JGT       nf8
	VPAND     (SI)(AX*4), Y15, Y0
	VPAND     32(SI)(AX*4), Y15, Y1
	VPAND     64(SI)(AX*4), Y15, Y2
	VPAND     96(SI)(AX*4), Y15, Y3
	VPCMPEQD  Y15, Y0, Y0
	VPCMPEQD  Y15, Y1, Y1
	VPCMPEQD  Y15, Y2, Y2
	VPCMPEQD  Y15, Y3, Y3
	VPOR      Y1, Y0, Y0
	VPOR      Y3, Y2, Y2
	VPOR      Y2, Y0, Y0
	VPTEST    Y0, Y0
	JNZ       nfdone
	ADDQ      $32, AX
	JMP       nf32

nf8:
	CMPQ     AX, CX
	JGE      nfdone
	VPAND    (SI)(AX*4), Y15, Y0
	VPCMPEQD Y15, Y0, Y0
	VPTEST   Y0, Y0
	JNZ      nfdone
	ADDQ     $8, AX
	JMP      nf8

nfdone:
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET
