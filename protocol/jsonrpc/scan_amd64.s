//go:build amd64 && !purego

#include "textflag.h"

DATA scanQuote<>+0x00(SB)/8, $0x2222222222222222
DATA scanQuote<>+0x08(SB)/8, $0x2222222222222222
DATA scanQuote<>+0x10(SB)/8, $0x2222222222222222
DATA scanQuote<>+0x18(SB)/8, $0x2222222222222222
GLOBL scanQuote<>(SB), RODATA|NOPTR, $32

DATA scanBackslash<>+0x00(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA scanBackslash<>+0x08(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA scanBackslash<>+0x10(SB)/8, $0x5C5C5C5C5C5C5C5C
DATA scanBackslash<>+0x18(SB)/8, $0x5C5C5C5C5C5C5C5C
GLOBL scanBackslash<>(SB), RODATA|NOPTR, $32

// scanSpace is 0x20 in every byte: as signed bytes, those below it are
// the control characters and everything from 0x80.
DATA scanSpace<>+0x00(SB)/8, $0x2020202020202020
DATA scanSpace<>+0x08(SB)/8, $0x2020202020202020
DATA scanSpace<>+0x10(SB)/8, $0x2020202020202020
DATA scanSpace<>+0x18(SB)/8, $0x2020202020202020
GLOBL scanSpace<>(SB), RODATA|NOPTR, $32

// func plainRunAVX2(s []byte) int
TEXT ·plainRunAVX2(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), CX
	MOVQ SI, R8 // start
	CMPQ CX, $32
	JL   none
	VMOVDQU scanQuote<>(SB), Y15
	VMOVDQU scanBackslash<>(SB), Y14
	VMOVDQU scanSpace<>(SB), Y13
	CMPQ CX, $64
	JL   tail32

loop64:
	VMOVDQU  (SI), Y0
	VMOVDQU  32(SI), Y4
	VPCMPEQB Y15, Y0, Y1
	VPCMPEQB Y14, Y0, Y2
	VPCMPGTB Y0, Y13, Y3
	VPOR     Y2, Y1, Y1
	VPOR     Y3, Y1, Y1 // special bytes of the first 32
	VPCMPEQB Y15, Y4, Y5
	VPCMPEQB Y14, Y4, Y6
	VPCMPGTB Y4, Y13, Y7
	VPOR     Y6, Y5, Y5
	VPOR     Y7, Y5, Y5 // of the second 32
	VPOR     Y5, Y1, Y6
	VPTEST   Y6, Y6
	JNZ      found64
	ADDQ     $64, SI
	SUBQ     $64, CX
	CMPQ     CX, $64
	JGE      loop64
	CMPQ     CX, $32
	JL       end

tail32:
	VMOVDQU  (SI), Y0
	VPCMPEQB Y15, Y0, Y1
	VPCMPEQB Y14, Y0, Y2
	VPCMPGTB Y0, Y13, Y3
	VPOR     Y2, Y1, Y1
	VPOR     Y3, Y1, Y1
	VPMOVMSKB Y1, AX
	TESTL    AX, AX
	JNZ      found
	ADDQ     $32, SI
	JMP      end

found64:
	VPMOVMSKB Y1, AX
	VPMOVMSKB Y5, BX
	SHLQ      $32, BX
	ORQ       BX, AX

found:
	BSFQ AX, AX
	ADDQ AX, SI

end:
	VZEROUPPER

none:
	SUBQ R8, SI
	MOVQ SI, ret+24(FP)
	RET
