package protocol

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

// The block encoder reads nothing past src and writes nothing past dst,
// for every length of either, and what it wrote is encoding/base64's.
func TestEncodeChunkBlocksStayInBounds(t *testing.T) {
	const guard = 64
	for n := range 200 {
		src := beforeGuardPage(t, n)
		for i := range src {
			src[i] = byte(i*29 + n)
		}
		want := base64.StdEncoding.EncodeToString(src)
		for room := 0; room <= len(want); room += 5 {
			buf := bytes.Repeat([]byte{0xAA}, room+guard)
			consumed, written := encodeChunkBlocks(buf[:room:room], src)
			require.Zero(t, consumed%24, "%d bytes, room %d", n, room)
			require.Equal(t, consumed/3*4, written)
			require.LessOrEqual(t, written, room)
			require.Equal(t, want[:written], string(buf[:written]), "%d bytes, room %d", n, room)
			require.Equal(t, bytes.Repeat([]byte{0xAA}, guard), buf[room:], "wrote past dst: %d bytes, room %d", n, room)
		}
	}
	if consumed, _ := encodeChunkBlocks(make([]byte, 64), make([]byte, 48)); consumed == 0 {
		t.Log("no block encoder on this CPU: only the bounds of doing nothing were checked")
	}
}
