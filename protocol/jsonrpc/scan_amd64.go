//go:build amd64 && !purego

package jsonrpc

// plainRunAVX2 returns the index of the first byte of s that is a quote,
// a backslash, a control character or not ASCII, looking 64 and then 32
// bytes at a time; where none is found it returns how many bytes it
// looked at, which leaves fewer than 32 unseen.
//
//go:noescape
func plainRunAVX2(s []byte) int

// plainRun returns n such that s[:n] holds no quote, backslash, control
// character or byte from 0x80: a string's run with nothing to check. It
// stops at the first such byte, or looks no further than the last 32
// bytes; 0 where the CPU has no AVX2.
func plainRun(s []byte) int {
	if !hasAVX2 {
		return 0
	}
	return plainRunAVX2(s)
}
