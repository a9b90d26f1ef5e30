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

var _ JSONDecoder = (*ArtifactWriteParams)(nil)

// DecodeJSON decodes data into p as json.Unmarshal would (JSONDecoder).
// Its fast path takes the plain shape of the small members with data
// null, which is what the transport hands it after cutting a big chunk's
// base64 out of the params to decode that itself (jsonrpc's unmarshal);
// encoding/json's reflection was most of what was left of decoding a
// chunk's params. Anything else goes to encoding/json.
func (p *ArtifactWriteParams) DecodeJSON(data []byte) error {
	q := *p
	if decodeArtifactWriteParams(data, &q) {
		*p = q
		return nil
	}
	return unmarshalInto(data, p)
}

func decodeArtifactWriteParams(data []byte, p *ArtifactWriteParams) bool {
	var seen uint8
	return decodeObject(data, func(d *jsonScan, key []byte) bool {
		switch string(key) {
		case "artifact_id":
			return d.once(&seen, 1) && d.stringInto(&p.ArtifactID)
		case "offset":
			return d.once(&seen, 2) && d.int64Into(&p.Offset)
		case "data":
			// null sets a []byte to nil; a string is base64 for
			// encoding/json.
			if d.once(&seen, 4) && d.literal("null") {
				p.Data = nil
				return true
			}
		}
		return false
	})
}

// int64Into reads an integer member into an int64 as encoding/json does:
// only an integer of at most 18 digits (which cannot overflow) reads, a
// fraction, an exponent or a longer one go to encoding/json; null leaves
// the field as it is.
func (d *jsonScan) int64Into(field *int64) bool {
	if d.literal("null") {
		return true
	}
	j := d.i
	neg := j < len(d.b) && d.b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
		n = n*10 + int64(d.b[j]-'0')
		j++
	}
	digits := j - start
	if digits == 0 || digits > 18 || (digits > 1 && d.b[start] == '0') {
		return false
	}
	if j < len(d.b) && (d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return false
	}
	if neg {
		n = -n
	}
	*field, d.i = n, j
	return true
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
