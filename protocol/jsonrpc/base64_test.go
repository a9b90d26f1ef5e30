package jsonrpc

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fast decoder gives encoding/base64's bytes for every length around
// its loop's bounds.
func TestDecodeBase64MatchesEncodingBase64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		enc := base64.StdEncoding.EncodeToString(src)
		dst := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
		k, err := decodeBase64(dst, []byte(enc))
		require.NoError(t, err)
		assert.Equal(t, src, dst[:k], "%d bytes", n)
	}
}

// Every bad input is refused with encoding/base64's own error, wherever the
// bad byte is: in the fast loop's groups, in the tail, or as padding
// before the end; what encoding/base64 accepts (line breaks) decodes the
// same.
func TestDecodeBase64RefusesAsEncodingBase64(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i * 7)
	}
	good := base64.StdEncoding.EncodeToString(src)
	for _, bad := range []byte{'!', '=', '"', '\\', 0, 0x80, 0xff, '-', '_', '\n', '\r', ' '} {
		for _, at := range []int{0, 1, 7, 8, 9, 63, 64, 200, len(good) - 9, len(good) - 8, len(good) - 3, len(good) - 1} {
			in := []byte(good)
			in[at] = bad
			want := make([]byte, len(in))
			wn, werr := base64.StdEncoding.Decode(want, in)
			got := make([]byte, len(in))
			gn, gerr := decodeBase64(got, in)
			require.Equal(t, werr, gerr, "byte %q at %d", bad, at)
			if werr == nil {
				assert.Equal(t, want[:wn], got[:gn], "byte %q at %d", bad, at)
			}
		}
	}
}

// The block decoder stops at the 32-character block that holds a
// character outside the alphabet, whatever the character and wherever in
// the block, and what it decoded before is encoding/base64's.
func TestDecodeBase64BlocksStopAtTheBadBlock(t *testing.T) {
	src := make([]byte, 96)
	for i := range src {
		src[i] = byte(i * 11)
	}
	good := []byte(base64.StdEncoding.EncodeToString(src)) // 128 characters
	want := make([]byte, len(src))
	_, err := base64.StdEncoding.Decode(want, good)
	require.NoError(t, err)
	dst := make([]byte, len(good))
	consumed, written := decodeBase64Blocks(dst, good)
	if consumed == 0 {
		t.Skip("no block decoder on this CPU")
	}
	// Three blocks: the fourth is within the 40 characters left over.
	require.Equal(t, 96, consumed)
	require.Equal(t, 72, written)
	require.Equal(t, want[:written], dst[:written])
	for c := range 256 {
		valid := strings.IndexByte(b64Alphabet, byte(c)) >= 0
		for _, at := range []int{0, 1, 15, 16, 31, 32, 33, 47, 63, 64, 95} {
			in := bytes.Clone(good)
			in[at] = byte(c)
			consumed, written := decodeBase64Blocks(dst, in)
			if valid {
				require.Equal(t, 96, consumed, "%q at %d", c, at)
				continue
			}
			block := at / 32 * 32
			require.Equal(t, block, consumed, "%q at %d", c, at)
			require.Equal(t, block/4*3, written, "%q at %d", c, at)
			require.Equal(t, want[:written], dst[:written], "%q at %d", c, at)
		}
	}
}

// FuzzDecodeBase64: for any input the fast decoder's outcome is
// encoding/base64's. The seed corpus is under testdata/fuzz/FuzzDecodeBase64.
func FuzzDecodeBase64(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		want := make([]byte, base64.StdEncoding.DecodedLen(len(in)))
		wn, werr := base64.StdEncoding.Decode(want, in)
		got := make([]byte, base64.StdEncoding.DecodedLen(len(in)))
		gn, gerr := decodeBase64(got, in)
		require.Equal(t, werr, gerr)
		if werr == nil {
			require.Equal(t, want[:wn], got[:gn])
		}
	})
}

// BenchmarkBase64 decodes one 64 KiB chunk with encoding/base64, with
// the pair table alone and with decodeBase64 (AVX2 blocks, then pairs),
// in the same run.
func BenchmarkBase64(b *testing.B) {
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	enc := []byte(base64.StdEncoding.EncodeToString(src))
	dst := make([]byte, len(enc))
	for name, decode := range map[string]func(dst, src []byte) (int, error){
		"decode/encoding-base64": base64.StdEncoding.Decode,
		"decode/pairs":           func(dst, src []byte) (int, error) { return decodeBase64Pairs(dst, src, 0, 0) },
		"decode/fast":            decodeBase64,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := decode(dst, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
