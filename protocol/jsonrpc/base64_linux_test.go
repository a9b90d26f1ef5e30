package jsonrpc

import (
	"bytes"
	"encoding/base64"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// beforeGuardPage returns n bytes that end where an unreadable page
// begins, so that a read past them faults.
func beforeGuardPage(t *testing.T, n int) []byte {
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	require.NoError(t, syscall.Mprotect(mem[page:], syscall.PROT_NONE))
	return mem[page-n : page : page]
}

// The block decoder reads nothing past src and writes nothing past dst,
// and leaves the last 8 characters or more to the caller, for every
// length of either.
func TestDecodeBase64BlocksStayInBounds(t *testing.T) {
	src := make([]byte, 150)
	for i := range src {
		src[i] = byte(i * 13)
	}
	enc := []byte(base64.StdEncoding.EncodeToString(src))
	const guard = 64
	for n := range len(enc) + 1 {
		in := beforeGuardPage(t, n)
		copy(in, enc)
		for room := 0; room <= n; room += 7 {
			buf := bytes.Repeat([]byte{0xAA}, room+guard)
			consumed, written := decodeBase64Blocks(buf[:room:room], in)
			require.Zero(t, consumed%32, "%d characters, room %d", n, room)
			require.Equal(t, consumed/4*3, written)
			require.LessOrEqual(t, consumed, max(0, n-9), "%d characters, room %d", n, room)
			require.LessOrEqual(t, written+8, max(8, room), "%d characters, room %d", n, room)
			require.Equal(t, bytes.Repeat([]byte{0xAA}, guard), buf[room:], "wrote past dst: %d characters, room %d", n, room)
		}
	}
}
