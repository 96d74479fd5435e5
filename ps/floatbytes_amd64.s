#include "textflag.h"

// func nonFiniteAVX2(p *float32, n int) int
// The index of the first block of 32 floats (of the first n - n%32) that
// holds a NaN or ±Inf (exponent bits all ones), or n - n%32 if none does.
TEXT ·nonFiniteAVX2(SB), NOSPLIT, $0-24
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	ANDQ         $~31, CX
	XORQ         AX, AX
	MOVL         $0x7f800000, DX
	MOVL         DX, X15
	VPBROADCASTD X15, Y15
loop:
	CMPQ      AX, CX
	JGE       done
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
	JNE       found
	ADDQ      $32, AX
	JMP       loop
found:
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET
done:
	MOVQ CX, ret+16(FP)
	VZEROUPPER
	RET
