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

// Tables of the UTF-8 validation of Keiser and Lemire ("Validating UTF-8
// in less than one instruction per byte", 2021), as simdjson has them:
// each byte's error classes by the high nibble of the byte before it
// (tab1), by that byte's low nibble (tab2), and by its own high nibble
// (tab3); a byte is in error where all three share a class.
DATA utf8tab1<>+0x00(SB)/8, $0x0202020202020202
DATA utf8tab1<>+0x08(SB)/8, $0x4915012180808080
DATA utf8tab1<>+0x10(SB)/8, $0x0202020202020202
DATA utf8tab1<>+0x18(SB)/8, $0x4915012180808080
GLOBL utf8tab1<>(SB), (RODATA|NOPTR), $32

DATA utf8tab2<>+0x00(SB)/8, $0xCBCBCB8B8383A3E7
DATA utf8tab2<>+0x08(SB)/8, $0xCBCBDBCBCBCBCBCB
DATA utf8tab2<>+0x10(SB)/8, $0xCBCBCB8B8383A3E7
DATA utf8tab2<>+0x18(SB)/8, $0xCBCBDBCBCBCBCBCB
GLOBL utf8tab2<>(SB), (RODATA|NOPTR), $32

DATA utf8tab3<>+0x00(SB)/8, $0x0101010101010101
DATA utf8tab3<>+0x08(SB)/8, $0x01010101BABAAEE6
DATA utf8tab3<>+0x10(SB)/8, $0x0101010101010101
DATA utf8tab3<>+0x18(SB)/8, $0x01010101BABAAEE6
GLOBL utf8tab3<>(SB), (RODATA|NOPTR), $32

// func validUTF8AVX2(p []byte) bool
//
// Reports whether the first len(p)&^31 bytes of p hold no invalid UTF-8,
// a sequence cut at their end aside (the caller checks the rest from the
// start of that sequence). The bytes before p count as ASCII. Needs AVX2.
TEXT ·validUTF8AVX2(SB), NOSPLIT, $0-25
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX

	VMOVDQU utf8tab1<>(SB), Y2
	VMOVDQU utf8tab2<>(SB), Y3
	VMOVDQU utf8tab3<>(SB), Y4
	MOVL $0x0f, AX
	VMOVD AX, X5
	VPBROADCASTB X5, Y5 // low nibble mask
	MOVL $0x60, AX
	VMOVD AX, X6
	VPBROADCASTB X6, Y6 // 0xe0 - 0x80: a third byte follows a byte >= 0xe0
	MOVL $0x70, AX
	VMOVD AX, X7
	VPBROADCASTB X7, Y7 // 0xf0 - 0x80: a fourth byte follows a byte >= 0xf0
	MOVL $0x80, AX
	VMOVD AX, X15
	VPBROADCASTB X15, Y15
	VPXOR Y1, Y1, Y1 // the previous block
	VPXOR Y8, Y8, Y8 // errors

uloop:
	CMPQ CX, $32
	JB   udone
	VMOVDQU (SI), Y0
	VPERM2I128 $0x21, Y0, Y1, Y9 // the previous block's high lane, this block's low lane
	VPALIGNR $15, Y9, Y0, Y10    // prev1: each byte's predecessor
	VPALIGNR $14, Y9, Y0, Y11    // prev2
	VPALIGNR $13, Y9, Y0, Y12    // prev3

	VPSRLW  $4, Y10, Y13
	VPAND   Y5, Y13, Y13
	VPSHUFB Y13, Y2, Y13 // tab1[prev1 >> 4]
	VPAND   Y5, Y10, Y14
	VPSHUFB Y14, Y3, Y14 // tab2[prev1 & 15]
	VPAND   Y14, Y13, Y13
	VPSRLW  $4, Y0, Y14
	VPAND   Y5, Y14, Y14
	VPSHUFB Y14, Y4, Y14 // tab3[byte >> 4]
	VPAND   Y14, Y13, Y13 // special cases

	VPSUBUSB Y6, Y11, Y11
	VPSUBUSB Y7, Y12, Y12
	VPOR     Y12, Y11, Y11
	VPAND    Y15, Y11, Y11 // must be a third or fourth byte
	VPXOR    Y13, Y11, Y11
	VPOR     Y11, Y8, Y8

	VMOVDQU Y0, Y1
	ADDQ $32, SI
	SUBQ $32, CX
	JMP  uloop

udone:
	VPTEST Y8, Y8
	SETEQ  ret+24(FP)
	VZEROUPPER
	RET
