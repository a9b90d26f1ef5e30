package jsonrpc

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// plainRun stops at the first quote, backslash, control character or
// byte from 0x80, wherever it is and whatever else follows, else looks no
// further than the last 32 bytes; it reads nothing past s.
func TestPlainRunStopsAtTheFirstSpecialByte(t *testing.T) {
	if plainRun(bytes.Repeat([]byte("A"), 64)) == 0 {
		t.Skip("no AVX2 scan on this CPU")
	}
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	for n := range 200 {
		s := beforeGuardPage(t, n)
		for i := range s {
			s[i] = "QUJDREVGR0g+/"[i%13]
		}
		got := plainRun(s)
		require.GreaterOrEqual(t, got, n-31, "%d plain bytes", n)
		require.LessOrEqual(t, got, n)
		if n < 32 {
			require.Zero(t, got, "%d plain bytes", n)
		}
		for _, at := range []int{0, 1, 31, 32, 33, 63, 64, 65, 100, n - 33, n - 32, n - 1} {
			if at < 0 || at >= n {
				continue
			}
			for c := range 256 {
				keep := s[at]
				s[at] = byte(c)
				got := plainRun(s)
				s[at] = keep
				switch {
				case !special(byte(c)):
					require.GreaterOrEqual(t, got, n-31, "%q at %d of %d", c, at, n)
				case at < n/32*32:
					require.Equal(t, at, got, "%q at %d of %d", c, at, n)
				default:
					// In the tail it may not look at.
					require.LessOrEqual(t, got, at, "%q at %d of %d", c, at, n)
				}
			}
		}
	}
}
