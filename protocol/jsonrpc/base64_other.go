//go:build !amd64 || purego

package jsonrpc

// decodeBase64Blocks decodes nothing without the amd64 assembly; the
// portable loop does it all.
func decodeBase64Blocks(dst, src []byte) (consumed, written int) { return 0, 0 }
