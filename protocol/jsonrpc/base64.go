package jsonrpc

import (
	"encoding/base64"
	"encoding/binary"
	"sync"
)

// Decoding base64 for artifact chunks, the protocol's only big values
// (unmarshal's []byte fields): the standard encoding as encoding/base64
// has it, but 32 characters a step with AVX2 where the CPU has it
// (base64_amd64.s), then two characters (twelve bits) per table lookup
// instead of one (BenchmarkBase64: a 64 KiB chunk in about a tenth of
// encoding/base64's time). Whatever the fast loops do not cover, the tail
// with its padding and every input they refuse, goes through
// encoding/base64 itself, so the outcome, errors included, is
// encoding/base64's. (Encoding is protocol.ArtifactWriteParams'.)

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// b64Invalid marks a pair of characters that is not two base64 digits.
const b64Invalid = 0x8000

var (
	b64Tables sync.Once
	// b64Decode maps two characters, the first in the low byte, to their
	// twelve bits, or b64Invalid (128 KiB: built on first use, not at
	// start, which every extension would pay).
	b64Decode *[1 << 16]uint16
)

func buildBase64Tables() {
	var one [256]uint16
	for i := range one {
		one[i] = b64Invalid
	}
	for i := range len(b64Alphabet) {
		one[b64Alphabet[i]] = uint16(i)
	}
	dec := new([1 << 16]uint16)
	for i := range dec {
		a, b := one[i&0xff], one[i>>8]
		if a == b64Invalid || b == b64Invalid {
			dec[i] = b64Invalid
			continue
		}
		dec[i] = a<<6 | b
	}
	b64Decode = dec
}

// decodeBase64 is base64.StdEncoding.Decode(dst, src): the same bytes
// and the same error for any src (line breaks, which encoding/base64
// skips, send it down encoding/base64's path).
func decodeBase64(dst, src []byte) (int, error) {
	if len(src) < 64 {
		return base64.StdEncoding.Decode(dst, src)
	}
	// 32 characters a step where the CPU can (AVX2), then the pairs.
	si, di := decodeBase64Blocks(dst, src)
	return decodeBase64Pairs(dst, src, si, di)
}

// decodeBase64Pairs is decodeBase64 of src, whose first si characters
// are decoded already into dst[:di].
func decodeBase64Pairs(dst, src []byte, si, di int) (int, error) {
	b64Tables.Do(buildBase64Tables)
	dec := b64Decode
	// Eight characters a step, the last eight (which may hold padding)
	// left to encoding/base64; six bytes out, written as eight.
	for len(src)-si > 8 && len(dst)-di >= 8 {
		x := binary.LittleEndian.Uint64(src[si:])
		a, b := uint64(dec[x&0xffff]), uint64(dec[x>>16&0xffff])
		c, d := uint64(dec[x>>32&0xffff]), uint64(dec[x>>48])
		if (a|b|c|d)&b64Invalid != 0 {
			// Not base64: encoding/base64 says where, as it would have.
			return base64.StdEncoding.Decode(dst, src)
		}
		binary.BigEndian.PutUint64(dst[di:], (a<<36|b<<24|c<<12|d)<<16)
		si += 8
		di += 6
	}
	n, err := base64.StdEncoding.Decode(dst[di:], src[si:])
	if err != nil {
		// The offset encoding/base64 reports counts from src's start.
		return base64.StdEncoding.Decode(dst, src)
	}
	return di + n, nil
}
