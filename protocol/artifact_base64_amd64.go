//go:build amd64 && !purego

package protocol

// hasAVX2 says the CPU and the OS support AVX2, which encodeChunkBlocks
// needs.
var hasAVX2 = cpuHasAVX2()

// cpuHasAVX2 asks CPUID for AVX2 and XGETBV for the OS saving the YMM
// registers (as protocol/jsonrpc's does: neither package may import the
// other).
func cpuHasAVX2() bool

// encodeChunkAVX2 encodes 24 bytes at a time into 32 base64 characters,
// with AVX2, while src holds at least 28 bytes (each step reads 28) and
// dst room for 32, and returns how many bytes it consumed and how many
// characters it wrote; what is left is the caller's.
//
//go:noescape
func encodeChunkAVX2(dst, src []byte) (consumed, written int)

// encodeChunkBlocks is encodeChunkAVX2 where the CPU has AVX2, and
// encodes nothing elsewhere.
func encodeChunkBlocks(dst, src []byte) (consumed, written int) {
	if !hasAVX2 {
		return 0, 0
	}
	return encodeChunkAVX2(dst, src)
}
