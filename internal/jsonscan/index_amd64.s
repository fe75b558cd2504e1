//go:build !purego

#include "textflag.h"

// func indexSpecialAVX2(b []byte, high uint32) int
//
// Scans b 32 bytes at a time for the first byte that is '"', '\\', below
// 0x20, or (when high is 0xffffffff) at least 0x80, and returns its index,
// or -1 when none of the first len(b)&^31 bytes is one (the caller scans the
// rest). Needs AVX2.
TEXT ·indexSpecialAVX2(SB), NOSPLIT, $0-40
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	MOVL high+24(FP), DX
	MOVQ SI, DI

	MOVL $0x22, AX
	VMOVD AX, X1
	VPBROADCASTB X1, Y1 // '"'
	MOVL $0x5c, AX
	VMOVD AX, X2
	VPBROADCASTB X2, Y2 // '\\'
	MOVL $0x1f, AX
	VMOVD AX, X3
	VPBROADCASTB X3, Y3 // 0x1f

loop:
	CMPQ CX, $32
	JB   none
	VMOVDQU (SI), Y0
	VPCMPEQB Y1, Y0, Y4
	VPCMPEQB Y2, Y0, Y5
	VPMINUB  Y3, Y0, Y6
	VPCMPEQB Y6, Y0, Y6 // b <= 0x1f
	VPOR     Y5, Y4, Y4
	VPOR     Y6, Y4, Y4
	VPMOVMSKB Y4, AX
	VPMOVMSKB Y0, BX    // high bits
	ANDL DX, BX
	ORL  BX, AX
	TESTL AX, AX
	JNZ  found
	ADDQ $32, SI
	SUBQ $32, CX
	JMP  loop

found:
	BSFL AX, AX
	SUBQ DI, SI
	ADDQ AX, SI
	MOVQ SI, ret+32(FP)
	VZEROUPPER
	RET

none:
	MOVQ $-1, ret+32(FP)
	VZEROUPPER
	RET
