package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// signatureVersion prefixes every signature, so a future change of the
// canonical form can never be mistaken for a content change.
const signatureVersion = "v1:"

// Signature is the canonical signature of an envelope's content: a digest
// of Source, DeliveryID, ScopeID, Family, Type, Schema, Parent, the sorted
// set of Works, OccurredAt and the canonical form of Payload. ID is not
// covered. The canonical payload sorts object keys and writes every number
// as its exact decimal value, so key order, whitespace, escapes and number
// spelling (1.0, 1e0, 10e-1) never change a signature. A payload that is not
// one valid JSON value is ErrInvalid.
func Signature(env Envelope) (string, error) {
	s := getSigning()
	defer putSigning(s)
	if len(env.Payload) == 0 {
		s.payload.WriteString("null")
	} else if err := s.canonical(&s.payload, env.Payload); err != nil {
		return "", fmt.Errorf("%w: payload: %v", ErrInvalid, err)
	}
	var occurred []byte
	if !env.OccurredAt.IsZero() {
		occurred = env.OccurredAt.UTC().AppendFormat(s.occurred[:0], time.RFC3339Nano)
	}
	var works string
	nworks := 0
	if len(env.Works) > 0 {
		set := normaliseSet(env.Works)
		works, nworks = strings.Join(set, "\x00"), len(set)
	}
	// Each field is length-prefixed, so no two distinct envelopes share
	// an input: "<len>:<field>;" for each, in this order.
	pre := s.pre[:0]
	for _, f := range [...]string{env.Source, env.DeliveryID, env.ScopeID, env.Family, env.Type, env.Schema, env.Parent, works} {
		pre = appendSigField(pre, f)
	}
	pre = appendSigField(pre, occurred)
	var count [20]byte
	pre = appendSigField(pre, strconv.AppendInt(count[:0], int64(nworks), 10))
	pre = appendSigField(pre, s.payload.Bytes())
	s.pre = pre
	sum := sha256.Sum256(pre)
	var out [len(signatureVersion) + 2*sha256.Size]byte
	copy(out[:], signatureVersion)
	hex.Encode(out[len(signatureVersion):], sum[:])
	return string(out[:]), nil
}

func appendSigField[T string | []byte](dst []byte, f T) []byte {
	dst = strconv.AppendInt(dst, int64(len(f)), 10)
	dst = append(dst, ':')
	dst = append(dst, f...)
	return append(dst, ';')
}

// signing is the scratch of one signature or validation, pooled: the
// canonical payload, the digest's input and the fast path's per-depth
// buffers.
type signing struct {
	payload  bytes.Buffer
	pre      []byte
	occurred [64]byte
	fast     fastCanonical
}

var signingPool = sync.Pool{New: func() any { return new(signing) }}

func getSigning() *signing { return signingPool.Get().(*signing) }

// maxPooledScratch is the largest buffer a pooled signing keeps: one large
// payload must not pin its megabyte in the pool.
const maxPooledScratch = 64 << 10

func putSigning(s *signing) {
	if s.payload.Cap() > maxPooledScratch || cap(s.pre) > maxPooledScratch || s.fast.large() {
		return
	}
	s.payload.Reset()
	s.pre = s.pre[:0]
	signingPool.Put(s)
}

// DefaultEventID is the ID an Event gets when its envelope names none: a
// digest of its identity, so accepting it again names the same Event.
func DefaultEventID(source, deliveryID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s;%d:%s;", len(source), source, len(deliveryID), deliveryID)
	return "ev-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// KVVersion is the version of a KV value: a digest of its bytes.
func KVVersion(value []byte) string {
	sum := sha256.Sum256(value)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// normaliseSet sorts and deduplicates a set of names.
func normaliseSet(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// canonicalJSON writes the canonical form of one JSON value: objects with
// keys in byte order, no insignificant whitespace, strings re-escaped, and
// numbers as exact decimals. Duplicate object keys, invalid UTF-8 and
// trailing data are refused.
func canonicalJSON(dst *bytes.Buffer, data []byte) error {
	s := getSigning()
	defer putSigning(s)
	return s.canonical(dst, data)
}

// canonical is canonicalJSON with s's scratch. Most documents take the
// fast path (appendCanonical), which writes exactly what the decoder-based
// path writes for the documents it takes and hands every other one, valid
// or not, to that path: which documents are refused, and with what error,
// is decided only there.
func (s *signing) canonical(dst *bytes.Buffer, data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	if out, ok := s.fast.appendCanonical(dst.AvailableBuffer(), data); ok {
		dst.Write(out)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := canonicalValue(dst, dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not a single JSON value")
	}
	return nil
}

func canonicalValue(dst *bytes.Buffer, dec *json.Decoder, depth int) error {
	if depth > MaxJSONDepth {
		return fmt.Errorf("nested deeper than %d", MaxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			type member struct{ key, value string }
			var members []member
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("not valid JSON: %v", err)
				}
				key := kt.(string)
				if seen[key] {
					return fmt.Errorf("duplicate object key %q", key)
				}
				seen[key] = true
				var val bytes.Buffer
				if err := canonicalValue(&val, dec, depth+1); err != nil {
					return err
				}
				members = append(members, member{key, val.String()})
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("not valid JSON: %v", err)
			}
			slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
			dst.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					dst.WriteByte(',')
				}
				writeJSONString(dst, m.key)
				dst.WriteByte(':')
				dst.WriteString(m.value)
			}
			dst.WriteByte('}')
		case '[':
			dst.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					dst.WriteByte(',')
				}
				if err := canonicalValue(dst, dec, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("not valid JSON: %v", err)
			}
			dst.WriteByte(']')
		default:
			return fmt.Errorf("not valid JSON: unexpected %v", v)
		}
	case string:
		writeJSONString(dst, v)
	case json.Number:
		n, err := canonicalNumber(string(v))
		if err != nil {
			return err
		}
		dst.WriteString(n)
	case bool:
		dst.WriteString(strconv.FormatBool(v))
	case nil:
		dst.WriteString("null")
	}
	return nil
}

func writeJSONString(dst *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a valid UTF-8 string always marshals
	dst.Write(b)
}

// canonicalNumber rewrites a JSON number as <sign><digits>e<exponent> with
// no leading or trailing zeros in digits, or "0": an exact form in which
// every spelling of one value is equal. It never converts to a float, so
// large integers and long fractions keep every digit.
func canonicalNumber(s string) (string, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := int64(0)
	if hasExp {
		e, err := strconv.ParseInt(expPart, 10, 32)
		if err != nil {
			return "", fmt.Errorf("number %q: exponent out of range", s)
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if trimmed == "" {
		return "0", nil
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.FormatInt(exp, 10), nil
}

// fastCanonical is the canonical form's fast path: a single pass over a
// document of plain JSON (strings without escapes, numbers of at most nine
// exponent digits, nesting within MaxJSONDepth) that writes what the
// decoder-based path writes for it, with no token or string allocated.
// Anything else, a backslash, a control character, a duplicate key,
// trailing data or a syntax error, makes it give up (ok false), and the
// decoder-based path decides: this path refuses nothing itself.
type fastCanonical struct {
	in  []byte
	pos int
	// levels are the objects under way, by depth: each object's member
	// values are written to its level's buffer, then copied out in key
	// order.
	levels []fastLevel
}

type fastLevel struct {
	buf     []byte
	members []fastMember
}

// fastMember is one object member: its key (the input's bytes between the
// quotes, escape-free, so also its decoded value) and its canonical value
// at buf[start:end] of its level.
type fastMember struct {
	key        []byte
	start, end int
}

// large reports whether a level holds a buffer too large to pool.
func (f *fastCanonical) large() bool {
	for _, l := range f.levels {
		if cap(l.buf) > maxPooledScratch || cap(l.members) > maxPooledScratch/32 {
			return true
		}
	}
	return false
}

// appendCanonical appends data's canonical form to dst, or reports false
// for a document the fast path does not take. data is valid UTF-8.
func (f *fastCanonical) appendCanonical(dst, data []byte) ([]byte, bool) {
	f.in, f.pos = data, 0
	defer func() { f.in = nil }()
	base := len(dst)
	dst, ok := f.value(dst, 0)
	if ok {
		f.space()
		ok = f.pos == len(f.in)
	}
	if !ok {
		return dst[:base], false
	}
	return dst, true
}

func (f *fastCanonical) space() {
	for f.pos < len(f.in) {
		switch f.in[f.pos] {
		case ' ', '\t', '\n', '\r':
			f.pos++
		default:
			return
		}
	}
}

func (f *fastCanonical) value(dst []byte, depth int) ([]byte, bool) {
	if depth > MaxJSONDepth {
		return dst, false
	}
	f.space()
	if f.pos >= len(f.in) {
		return dst, false
	}
	switch c := f.in[f.pos]; {
	case c == '{':
		return f.object(dst, depth)
	case c == '[':
		f.pos++
		dst = append(dst, '[')
		f.space()
		if f.pos < len(f.in) && f.in[f.pos] == ']' {
			f.pos++
			return append(dst, ']'), true
		}
		for {
			var ok bool
			if dst, ok = f.value(dst, depth+1); !ok {
				return dst, false
			}
			f.space()
			if f.pos >= len(f.in) {
				return dst, false
			}
			switch f.in[f.pos] {
			case ',':
				f.pos++
				dst = append(dst, ',')
			case ']':
				f.pos++
				return append(dst, ']'), true
			default:
				return dst, false
			}
		}
	case c == '"':
		s, ok := f.str()
		if !ok {
			return dst, false
		}
		return appendJSONString(dst, s), true
	case c == '-' || c >= '0' && c <= '9':
		return f.number(dst)
	case c == 't':
		return f.literal(dst, "true")
	case c == 'f':
		return f.literal(dst, "false")
	case c == 'n':
		return f.literal(dst, "null")
	}
	return dst, false
}

func (f *fastCanonical) literal(dst []byte, lit string) ([]byte, bool) {
	if !bytes.HasPrefix(f.in[f.pos:], []byte(lit)) {
		return dst, false
	}
	f.pos += len(lit)
	return append(dst, lit...), true
}

// str reads a string without escapes or control characters and returns
// its content.
func (f *fastCanonical) str() ([]byte, bool) {
	start := f.pos + 1
	for i := start; i < len(f.in); i++ {
		switch c := f.in[i]; {
		case c == '"':
			f.pos = i + 1
			return f.in[start:i], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (f *fastCanonical) object(dst []byte, depth int) ([]byte, bool) {
	f.pos++ // '{'
	if len(f.levels) <= depth {
		f.levels = append(f.levels, make([]fastLevel, depth+1-len(f.levels))...)
	}
	// The level is indexed, never held: a nested object may grow levels.
	f.levels[depth].buf = f.levels[depth].buf[:0]
	f.levels[depth].members = f.levels[depth].members[:0]
	f.space()
	if f.pos < len(f.in) && f.in[f.pos] == '}' {
		f.pos++
		return append(dst, '{', '}'), true
	}
	for {
		f.space()
		if f.pos >= len(f.in) || f.in[f.pos] != '"' {
			return dst, false
		}
		key, ok := f.str()
		if !ok {
			return dst, false
		}
		f.space()
		if f.pos >= len(f.in) || f.in[f.pos] != ':' {
			return dst, false
		}
		f.pos++
		start := len(f.levels[depth].buf)
		buf, ok := f.value(f.levels[depth].buf, depth+1)
		f.levels[depth].buf = buf
		if !ok {
			return dst, false
		}
		f.levels[depth].members = append(f.levels[depth].members, fastMember{key: key, start: start, end: len(buf)})
		f.space()
		if f.pos >= len(f.in) {
			return dst, false
		}
		if f.in[f.pos] == '}' {
			f.pos++
			break
		}
		if f.in[f.pos] != ',' {
			return dst, false
		}
		f.pos++
	}
	l := &f.levels[depth]
	slices.SortFunc(l.members, func(a, b fastMember) int { return bytes.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range l.members {
		if i > 0 {
			if bytes.Equal(m.key, l.members[i-1].key) {
				return dst, false // a duplicate key: the decoder's path names it
			}
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, l.buf[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

// number reads a JSON number and appends canonicalNumber's form of it.
func (f *fastCanonical) number(dst []byte) ([]byte, bool) {
	in, i := f.in, f.pos
	neg := in[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return dst, false
	}
	intPart := in[intStart:i]
	var frac []byte
	if i < len(in) && in[i] == '.' {
		i++
		fracStart := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == fracStart {
			return dst, false
		}
		frac = in[fracStart:i]
	}
	exp := int64(0)
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		expNeg := false
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		expStart := i
		for i < len(in) && in[i] == '0' {
			i++
		}
		sig := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == expStart || i-sig > 9 {
			// No digits, or perhaps beyond the 32 bits the decoder's path
			// allows: it decides.
			return dst, false
		}
		for _, c := range in[sig:i] {
			exp = exp*10 + int64(c-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	f.pos = i
	// As canonicalNumber: the digits of intPart and frac without leading
	// or trailing zeros, the exponent moved to match.
	exp -= int64(len(frac))
	digits := func(k int) byte { // the k-th digit of intPart+frac
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	n := len(intPart) + len(frac)
	lo, hi := 0, n
	for lo < hi && digits(lo) == '0' {
		lo++
	}
	for hi > lo && digits(hi-1) == '0' {
		hi--
	}
	exp += int64(n - hi)
	if lo == hi {
		return append(dst, '0'), true
	}
	if neg {
		dst = append(dst, '-')
	}
	for k := lo; k < hi; k++ {
		dst = append(dst, digits(k))
	}
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, exp, 10), true
}

// appendJSONString appends s as json.Marshal writes a string: quoted, with
// <, > and & as \u escapes and U+2028 and U+2029 escaped. s holds valid
// UTF-8 without '"', '\\' or control characters (the fast path's
// strings).
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '<':
			esc = `\u003c`
		case '>':
			esc = `\u003e`
		case '&':
			esc = `\u0026`
		case 0xE2:
			if i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
				esc = `\u2028`
				if s[i+2] == 0xA9 {
					esc = `\u2029`
				}
				dst = append(dst, s[start:i]...)
				dst = append(dst, esc...)
				i += 2
				start = i + 1
			}
			continue
		default:
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
