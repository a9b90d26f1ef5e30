//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 base64 encoder of W. Muła and D. Lemire, "Faster Base64
// Encoding and Decoding Using AVX2 Instructions" (ACM TWEB, 2018), for
// the standard alphabet. Each step encodes 12 bytes in each 128-bit lane.

// encSpread puts each 3-byte group of a lane in a 32-bit word as bytes
// 1, 0, 2, 1: its 24 bits as two big-endian 16-bit halves.
DATA encSpread<>+0x00(SB)/8, $0x0405030401020001
DATA encSpread<>+0x08(SB)/8, $0x0A0B090A07080607
DATA encSpread<>+0x10(SB)/8, $0x0405030401020001
DATA encSpread<>+0x18(SB)/8, $0x0A0B090A07080607
GLOBL encSpread<>(SB), RODATA|NOPTR, $32

// encMaskAC and encMulAC move the first and third six bits of a group to
// bytes 0 and 2 (VPMULHUW), encMaskBD and encMulBD the second and fourth
// to bytes 1 and 3 (VPMULLW).
DATA encMaskAC<>+0x00(SB)/8, $0x0FC0FC000FC0FC00
DATA encMaskAC<>+0x08(SB)/8, $0x0FC0FC000FC0FC00
DATA encMaskAC<>+0x10(SB)/8, $0x0FC0FC000FC0FC00
DATA encMaskAC<>+0x18(SB)/8, $0x0FC0FC000FC0FC00
GLOBL encMaskAC<>(SB), RODATA|NOPTR, $32

DATA encMulAC<>+0x00(SB)/8, $0x0400004004000040
DATA encMulAC<>+0x08(SB)/8, $0x0400004004000040
DATA encMulAC<>+0x10(SB)/8, $0x0400004004000040
DATA encMulAC<>+0x18(SB)/8, $0x0400004004000040
GLOBL encMulAC<>(SB), RODATA|NOPTR, $32

DATA encMaskBD<>+0x00(SB)/8, $0x003F03F0003F03F0
DATA encMaskBD<>+0x08(SB)/8, $0x003F03F0003F03F0
DATA encMaskBD<>+0x10(SB)/8, $0x003F03F0003F03F0
DATA encMaskBD<>+0x18(SB)/8, $0x003F03F0003F03F0
GLOBL encMaskBD<>(SB), RODATA|NOPTR, $32

DATA encMulBD<>+0x00(SB)/8, $0x0100001001000010
DATA encMulBD<>+0x08(SB)/8, $0x0100001001000010
DATA encMulBD<>+0x10(SB)/8, $0x0100001001000010
DATA encMulBD<>+0x18(SB)/8, $0x0100001001000010
GLOBL encMulBD<>(SB), RODATA|NOPTR, $32

// enc51 and enc26 sort six-bit values into the alphabet's ranges:
// VPSUBUSB by 51 leaves 1 to 12 for digits, '+' and '/', 0 for the rest;
// values below 26 (upper case) become 13.
DATA enc51<>+0x00(SB)/8, $0x3333333333333333
DATA enc51<>+0x08(SB)/8, $0x3333333333333333
DATA enc51<>+0x10(SB)/8, $0x3333333333333333
DATA enc51<>+0x18(SB)/8, $0x3333333333333333
GLOBL enc51<>(SB), RODATA|NOPTR, $32

DATA enc26<>+0x00(SB)/8, $0x1A1A1A1A1A1A1A1A
DATA enc26<>+0x08(SB)/8, $0x1A1A1A1A1A1A1A1A
DATA enc26<>+0x10(SB)/8, $0x1A1A1A1A1A1A1A1A
DATA enc26<>+0x18(SB)/8, $0x1A1A1A1A1A1A1A1A
GLOBL enc26<>(SB), RODATA|NOPTR, $32

DATA enc13<>+0x00(SB)/8, $0x0D0D0D0D0D0D0D0D
DATA enc13<>+0x08(SB)/8, $0x0D0D0D0D0D0D0D0D
DATA enc13<>+0x10(SB)/8, $0x0D0D0D0D0D0D0D0D
DATA enc13<>+0x18(SB)/8, $0x0D0D0D0D0D0D0D0D
GLOBL enc13<>(SB), RODATA|NOPTR, $32

// encShift, indexed by that range, is what to add to a six-bit value to
// get its character: 'a'-26, '0'-52 (ten times), '+'-62, '/'-63, 'A'.
DATA encShift<>+0x00(SB)/8, $0xFCFCFCFCFCFCFC47
DATA encShift<>+0x08(SB)/8, $0x000041F0EDFCFCFC
DATA encShift<>+0x10(SB)/8, $0xFCFCFCFCFCFCFC47
DATA encShift<>+0x18(SB)/8, $0x000041F0EDFCFCFC
GLOBL encShift<>(SB), RODATA|NOPTR, $32

// func cpuHasAVX2() bool
TEXT ·cpuHasAVX2(SB), NOSPLIT, $0-1
	XORL AX, AX
	CPUID
	CMPL AX, $7
	JB   no
	MOVL $1, AX
	XORL CX, CX
	CPUID
	// OSXSAVE (bit 27) and AVX (bit 28).
	ANDL $0x18000000, CX
	CMPL CX, $0x18000000
	JNE  no
	// The OS saves the XMM and YMM state (XCR0 bits 1 and 2).
	XORL CX, CX
	XGETBV
	ANDL $6, AX
	CMPL AX, $6
	JNE  no
	MOVL $7, AX
	XORL CX, CX
	CPUID
	// AVX2 (leaf 7, EBX bit 5).
	SHRL $5, BX
	ANDL $1, BX
	MOVB BX, ret+0(FP)
	RET
no:
	MOVB $0, ret+0(FP)
	RET

// func encodeChunkAVX2(dst, src []byte) (consumed, written int)
TEXT ·encodeChunkAVX2(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ DI, R8 // dst start
	MOVQ SI, R9 // src start
	// CX: bytes left past the 28 a step reads; DX: room left past 32.
	SUBQ $28, CX
	JL   done
	SUBQ $32, DX
	JL   done
	VMOVDQU encSpread<>(SB), Y15
	VMOVDQU encMaskAC<>(SB), Y14
	VMOVDQU encMulAC<>(SB), Y13
	VMOVDQU encMaskBD<>(SB), Y12
	VMOVDQU encMulBD<>(SB), Y11
	VMOVDQU enc51<>(SB), Y10
	VMOVDQU enc26<>(SB), Y9
	VMOVDQU enc13<>(SB), Y8
	VMOVDQU encShift<>(SB), Y7

loop:
	VMOVDQU     (SI), X0
	VINSERTI128 $1, 12(SI), Y0, Y0
	VPSHUFB     Y15, Y0, Y0
	VPAND       Y14, Y0, Y1
	VPMULHUW    Y13, Y1, Y1
	VPAND       Y12, Y0, Y2
	VPMULLW     Y11, Y2, Y2
	VPOR        Y2, Y1, Y1  // six bits in each byte
	VPSUBUSB    Y10, Y1, Y2
	VPCMPGTB    Y1, Y9, Y3
	VPAND       Y8, Y3, Y3
	VPOR        Y3, Y2, Y2
	VPSHUFB     Y2, Y7, Y2
	VPADDB      Y2, Y1, Y1
	VMOVDQU     Y1, (DI)
	ADDQ        $24, SI
	ADDQ        $32, DI
	SUBQ        $24, CX
	JL          stop
	SUBQ        $32, DX
	JGE         loop

stop:
	VZEROUPPER

done:
	SUBQ R9, SI
	SUBQ R8, DI
	MOVQ SI, consumed+48(FP)
	MOVQ DI, written+56(FP)
	RET
