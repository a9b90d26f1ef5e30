//go:build !amd64 || purego

package protocol

// encodeChunkBlocks encodes nothing without the amd64 assembly; the
// portable loop does it all.
func encodeChunkBlocks(dst, src []byte) (consumed, written int) { return 0, 0 }
