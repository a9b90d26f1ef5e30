package protocol

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// artifact.write carries up to MaxChunkBytes as base64, and encoding it was
// the largest part of the writer's CPU per chunk: encoding/json encodes a
// []byte one character per table lookup into a buffer of its own, which
// the transport then copies. ArtifactWriteParams therefore appends itself
// (AppendJSON, which the transport uses for any value that has one), its
// base64 two characters (twelve bits) per lookup, straight into the
// message being written. encoding/json stays the reference: the type has
// no MarshalJSON, and TestArtifactWriteParamsAppendJSON and
// FuzzArtifactWriteParamsAppendJSON hold AppendJSON to json.Marshal.

// AppendsStrictJSON declares that AppendJSON's output keeps the
// transport's strict rule and holds no line break (jsonrpc.StrictAppender),
// so the transport sends it unscanned: an id is plain ASCII or
// json.Marshal's string, which escapes line breaks and replaces invalid
// UTF-8; the offset is an integer; the data base64 or null.
// FuzzArtifactWriteParamsAppendJSON holds it to that.
func (ArtifactWriteParams) AppendsStrictJSON() {}

// AppendJSON appends p as json.Marshal writes it: the same bytes, but for
// an artifact id that encoding/json escapes, which is appended as the
// same string.
func (p ArtifactWriteParams) AppendJSON(buf []byte) ([]byte, error) {
	buf = append(buf, `{"artifact_id":`...)
	buf = appendChunkString(buf, p.ArtifactID)
	buf = append(buf, `,"offset":`...)
	buf = strconv.AppendInt(buf, p.Offset, 10)
	buf = append(buf, `,"data":`...)
	if p.Data == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendChunkBase64(buf, p.Data)
	}
	return append(buf, '}'), nil
}

// appendChunkString appends s as a JSON string: as it is when it needs no
// escape, else as json.Marshal writes it (invalid UTF-8 as U+FFFD).
func appendChunkString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

const chunkAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var (
	chunkPairsOnce sync.Once
	// chunkPairs maps twelve bits to their two base64 characters, the
	// first in the low byte. Built on first use, not at every start.
	chunkPairs *[1 << 12]uint16
)

// appendChunkBase64 appends data as a quoted string of its standard base64
// encoding (encoding/base64's, byte for byte).
func appendChunkBase64(buf, data []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(data))
	buf = slices.Grow(buf, n+2)
	buf = append(buf, '"')
	start := len(buf)
	buf = buf[:start+n]
	encodeChunkBase64(buf[start:], data)
	return append(buf, '"')
}

// encodeChunkBase64 is base64.StdEncoding.Encode(dst, src), six bytes a
// step (read as eight, the two extra being the next step's) written as
// eight characters at once; the tail, padding included, is
// encoding/base64's.
func encodeChunkBase64(dst, src []byte) {
	if len(src) < 64 {
		base64.StdEncoding.Encode(dst, src)
		return
	}
	chunkPairsOnce.Do(func() {
		t := new([1 << 12]uint16)
		for i := range t {
			t[i] = uint16(chunkAlphabet[i>>6]) | uint16(chunkAlphabet[i&63])<<8
		}
		chunkPairs = t
	})
	enc := chunkPairs
	// 24 bytes a step where the CPU can (AVX2), then the pairs.
	si, di := encodeChunkBlocks(dst, src)
	for len(src)-si >= 8 && len(dst)-di >= 8 {
		x := binary.BigEndian.Uint64(src[si:])
		v := uint64(enc[x>>52]) | uint64(enc[x>>40&0xfff])<<16 |
			uint64(enc[x>>28&0xfff])<<32 | uint64(enc[x>>16&0xfff])<<48
		binary.LittleEndian.PutUint64(dst[di:], v)
		si += 6
		di += 8
	}
	base64.StdEncoding.Encode(dst[di:], src[si:])
}
