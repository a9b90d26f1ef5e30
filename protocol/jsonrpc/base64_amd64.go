//go:build amd64 && !purego

package jsonrpc

// decodeBase64AVX2 decodes base64 32 characters at a time into 24 bytes,
// with AVX2, while src holds more than 40 characters and dst room for 32
// bytes (each step stores 32, of which 24 count). It stops at the first
// block holding a character outside the standard alphabet (padding
// included) and returns how many characters it consumed and how many
// bytes it wrote; what is left is the caller's.
//
//go:noescape
func decodeBase64AVX2(dst, src []byte) (consumed, written int)

// decodeBase64Blocks is decodeBase64AVX2 where the CPU has AVX2, and
// decodes nothing elsewhere.
func decodeBase64Blocks(dst, src []byte) (consumed, written int) {
	if !hasAVX2 {
		return 0, 0
	}
	return decodeBase64AVX2(dst, src)
}
