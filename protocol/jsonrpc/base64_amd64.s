//go:build amd64 && !purego

#include "textflag.h"

// The AVX2 base64 decoder of W. Muła and D. Lemire, "Faster Base64
// Encoding and Decoding Using AVX2 Instructions" (ACM TWEB, 2018), for
// the standard alphabet. Each table is 16 bytes, repeated for the second
// 128-bit lane.

// b64LutLo and b64LutHi, indexed by a character's low and high nibble,
// share a bit exactly when the character is not in the alphabet.
DATA b64LutLo<>+0x00(SB)/8, $0x1111111111111115
DATA b64LutLo<>+0x08(SB)/8, $0x1A1B1B1B1A131111
DATA b64LutLo<>+0x10(SB)/8, $0x1111111111111115
DATA b64LutLo<>+0x18(SB)/8, $0x1A1B1B1B1A131111
GLOBL b64LutLo<>(SB), RODATA|NOPTR, $32

DATA b64LutHi<>+0x00(SB)/8, $0x0804080402011010
DATA b64LutHi<>+0x08(SB)/8, $0x1010101010101010
DATA b64LutHi<>+0x10(SB)/8, $0x0804080402011010
DATA b64LutHi<>+0x18(SB)/8, $0x1010101010101010
GLOBL b64LutHi<>(SB), RODATA|NOPTR, $32

// b64LutRoll, indexed by the high nibble (minus one for '/'), is what to
// add to a character to get its six bits: 16 for '/', 19 for '+', 4 for
// digits, -65 for 'A'-'Z', -71 for 'a'-'z'.
DATA b64LutRoll<>+0x00(SB)/8, $0xB9B9BFBF04131000
DATA b64LutRoll<>+0x08(SB)/8, $0x0000000000000000
DATA b64LutRoll<>+0x10(SB)/8, $0xB9B9BFBF04131000
DATA b64LutRoll<>+0x18(SB)/8, $0x0000000000000000
GLOBL b64LutRoll<>(SB), RODATA|NOPTR, $32

// b64Mask2F is '/' in every byte, which is also the mask that keeps a
// nibble (bits 4 to 6 do not matter to VPSHUFB, bit 7 must be clear).
DATA b64Mask2F<>+0x00(SB)/8, $0x2F2F2F2F2F2F2F2F
DATA b64Mask2F<>+0x08(SB)/8, $0x2F2F2F2F2F2F2F2F
DATA b64Mask2F<>+0x10(SB)/8, $0x2F2F2F2F2F2F2F2F
DATA b64Mask2F<>+0x18(SB)/8, $0x2F2F2F2F2F2F2F2F
GLOBL b64Mask2F<>(SB), RODATA|NOPTR, $32

// b64Merge12 joins two six-bit values into twelve bits (VPMADDUBSW),
// b64Merge24 two twelve-bit values into 24 (VPMADDWD).
DATA b64Merge12<>+0x00(SB)/8, $0x0140014001400140
DATA b64Merge12<>+0x08(SB)/8, $0x0140014001400140
DATA b64Merge12<>+0x10(SB)/8, $0x0140014001400140
DATA b64Merge12<>+0x18(SB)/8, $0x0140014001400140
GLOBL b64Merge12<>(SB), RODATA|NOPTR, $32

DATA b64Merge24<>+0x00(SB)/8, $0x0001100000011000
DATA b64Merge24<>+0x08(SB)/8, $0x0001100000011000
DATA b64Merge24<>+0x10(SB)/8, $0x0001100000011000
DATA b64Merge24<>+0x18(SB)/8, $0x0001100000011000
GLOBL b64Merge24<>(SB), RODATA|NOPTR, $32

// b64Pack puts each lane's four 24-bit values in order in its first 12
// bytes (big-endian, as base64 is); b64Lanes moves the second lane's 12
// next to the first's.
DATA b64Pack<>+0x00(SB)/8, $0x090A040506000102
DATA b64Pack<>+0x08(SB)/8, $0xFFFFFFFF0C0D0E08
DATA b64Pack<>+0x10(SB)/8, $0x090A040506000102
DATA b64Pack<>+0x18(SB)/8, $0xFFFFFFFF0C0D0E08
GLOBL b64Pack<>(SB), RODATA|NOPTR, $32

DATA b64Lanes<>+0x00(SB)/8, $0x0000000100000000
DATA b64Lanes<>+0x08(SB)/8, $0x0000000400000002
DATA b64Lanes<>+0x10(SB)/8, $0x0000000600000005
DATA b64Lanes<>+0x18(SB)/8, $0x0000000000000000
GLOBL b64Lanes<>(SB), RODATA|NOPTR, $32

// func decodeBase64AVX2(dst, src []byte) (consumed, written int)
TEXT ·decodeBase64AVX2(SB), NOSPLIT, $0-64
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ DI, R8 // dst start
	MOVQ SI, R9 // src start
	// CX: characters left past the 40 kept; DX: room left past 32.
	SUBQ $40, CX
	JLE  done
	SUBQ $32, DX
	JL   done
	VMOVDQU b64LutLo<>(SB), Y14
	VMOVDQU b64LutHi<>(SB), Y13
	VMOVDQU b64LutRoll<>(SB), Y12
	VMOVDQU b64Mask2F<>(SB), Y15
	VMOVDQU b64Merge12<>(SB), Y11
	VMOVDQU b64Merge24<>(SB), Y10
	VMOVDQU b64Pack<>(SB), Y9
	VMOVDQU b64Lanes<>(SB), Y8

loop:
	VMOVDQU    (SI), Y0
	VPSRLD     $4, Y0, Y1
	VPAND      Y15, Y1, Y1 // high nibbles
	VPAND      Y15, Y0, Y2 // low nibbles
	VPSHUFB    Y1, Y13, Y3
	VPSHUFB    Y2, Y14, Y4
	VPTEST     Y3, Y4
	JNZ        stop        // a character outside the alphabet
	VPCMPEQB   Y15, Y0, Y5
	VPADDB     Y1, Y5, Y5
	VPSHUFB    Y5, Y12, Y5
	VPADDB     Y5, Y0, Y0  // six bits in each byte
	VPMADDUBSW Y11, Y0, Y0
	VPMADDWD   Y10, Y0, Y0
	VPSHUFB    Y9, Y0, Y0
	VPERMD     Y0, Y8, Y0
	VMOVDQU    Y0, (DI)
	ADDQ       $32, SI
	ADDQ       $24, DI
	SUBQ       $32, CX
	JLE        stop
	SUBQ       $24, DX
	JGE        loop

stop:
	VZEROUPPER

done:
	SUBQ R9, SI
	SUBQ R8, DI
	MOVQ SI, consumed+48(FP)
	MOVQ DI, written+56(FP)
	RET
