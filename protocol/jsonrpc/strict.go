package jsonrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The strict JSON rule. Beyond what encoding/json accepts, every string of a
// message, member names included, is valid UTF-8 once its escapes are
// read (no raw invalid byte, no escape of half a surrogate pair), and every
// number fits a float64. encoding/json would quietly turn a bad string into
// U+FFFD and a huge number into a decode error of whichever field it lands
// in; the transport instead refuses such a message as a whole, once, for
// every method: a request with -32602, a notification by dropping it, a
// response by failing its call with ErrInvalidResponse. Nothing of it
// reaches a handler, and nothing is echoed.

// strictNote records the first break of the strict rule a scan meets: off
// is the offset of the offending byte or number, -1 while there is none.
type strictNote struct {
	off     int
	what    string // what is wrong, such as "invalid UTF-8"
	inText  bool   // in a string (or member name), not a number
	pairLow int    // where the low half of a surrogate pair just read is
}

func (n *strictNote) reset()       { *n = strictNote{off: -1, pairLow: -1} }
func (n *strictNote) clean() bool  { return n.off < 0 }
func (n *strictNote) broken() bool { return n.off >= 0 }

func (n *strictNote) fail(at int, what string, inText bool) {
	if n.off < 0 {
		n.off, n.what, n.inText = at, what, inText
	}
}

// text checks the run of plain string bytes that starts at b[i], a byte
// from 0x80, up to the next quote, backslash or control character, and
// returns where the run ends. The run's end is found eight bytes at a
// time and its UTF-8 checked by one utf8.Valid (BenchmarkParseMessage).
func (n *strictNote) text(b []byte, i int) int {
	j := i
	for j < len(b) {
		for len(b)-j >= 8 && !endsText(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			break
		}
		if c := b[j]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
		j++
	}
	if run := b[i:j]; !utf8.Valid(run) {
		at := i
		for {
			r, size := utf8.DecodeRune(b[at:j])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		n.fail(at, "invalid UTF-8", true)
	}
	return j
}

// endsText reports whether any of the eight bytes in x is a quote, a
// backslash or a control character: hasSpecial without the bytes from 0x80.
func endsText(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	slash := x ^ (ones * '\\')
	return ((quote-ones)&^quote|(slash-ones)&^slash|(x-ones*0x20)&^x)&highs != 0
}

// escape checks the \uXXXX escape at b[i] (syntax already checked): half a
// surrogate pair must be followed, or preceded, by its other half.
func (n *strictNote) escape(b []byte, i int) {
	r := hex4(b[i+2 : i+6])
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00:
		if len(b)-i >= 12 && b[i+6] == '\\' && b[i+7] == 'u' && allHex(b[i+8:i+12]) {
			if lo := hex4(b[i+8 : i+12]); lo >= 0xdc00 && lo <= 0xdfff {
				n.pairLow = i + 6 // the low half, read next, completes the pair
				return
			}
		}
		n.fail(i, "an unpaired surrogate escape (not valid UTF-8)", true)
	case utf16.IsSurrogate(r) && n.pairLow != i:
		n.fail(i, "an unpaired surrogate escape (not valid UTF-8)", true)
	}
}

// number checks that the number b[start:end] fits a float64. Only a long
// literal or one with an exponent can overflow, so only those are parsed.
func (n *strictNote) number(b []byte, start, end int) {
	lit := b[start:end]
	long := end-start > 300
	if !long {
		for _, c := range lit {
			if c == 'e' || c == 'E' {
				long = true
				break
			}
		}
	}
	if !long {
		return
	}
	if _, err := strconv.ParseFloat(string(lit), 64); errors.Is(err, strconv.ErrRange) {
		n.fail(start, "a number beyond the range of a float64", false)
	}
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		}
	}
	return r
}

func allHex(h []byte) bool {
	for _, c := range h {
		if !isHex(c) {
			return false
		}
	}
	return true
}

// describe says what broke the rule and where, for the peer: the JSON path
// in the message of the value (or of the object whose member name) that
// holds the offending byte. It repeats none of the message's bytes but
// well-formed member names.
func (n *strictNote) describe(line []byte) string {
	path, inKey := pathAt(line, n.off)
	switch {
	case inKey:
		return fmt.Sprintf("%s in a member name in %s", n.what, orMessage(path))
	case n.inText:
		return fmt.Sprintf("%s in a string at %s", n.what, orMessage(path))
	}
	return fmt.Sprintf("%s at %s", n.what, orMessage(path))
}

func orMessage(path string) string {
	if path == "" {
		return "the message"
	}
	return path
}

// pathAt returns the JSON path of the innermost value of line (valid JSON)
// that holds the byte at off, and whether off is in one of that object's
// member names instead.
func pathAt(line []byte, off int) (string, bool) {
	var b strings.Builder
	i := skipSpace(line, 0)
	for {
		if i >= len(line) {
			return b.String(), false
		}
		switch line[i] {
		case '{':
			i = skipSpace(line, i+1)
			found := false
			for i < len(line) && line[i] == '"' {
				keyEnd, _ := skipString(line, i, nil)
				if off >= i && off < keyEnd {
					return b.String(), true
				}
				key, _ := decodeString(line[i:keyEnd])
				i = skipSpace(line, keyEnd)
				i = skipSpace(line, i+1) // past ':'
				end, _ := skipValue(line, i, 1, nil)
				if off >= i && off < end {
					if plainMember(key) {
						if b.Len() > 0 {
							b.WriteByte('.')
						}
						b.WriteString(key)
					} else {
						b.WriteString("[" + strconv.Quote(key) + "]")
					}
					found = true
					break
				}
				i = skipSpace(line, end)
				if i < len(line) && line[i] == ',' {
					i = skipSpace(line, i+1)
				}
			}
			if !found {
				return b.String(), false
			}
		case '[':
			i = skipSpace(line, i+1)
			found := false
			for k := 0; i < len(line) && line[i] != ']'; k++ {
				end, _ := skipValue(line, i, 1, nil)
				if off >= i && off < end {
					fmt.Fprintf(&b, "[%d]", k)
					found = true
					break
				}
				i = skipSpace(line, end)
				if i < len(line) && line[i] == ',' {
					i = skipSpace(line, i+1)
				}
			}
			if !found {
				return b.String(), false
			}
		default:
			return b.String(), false
		}
	}
}

// plainMember reports whether a member name can follow a dot in a path.
func plainMember(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$' || c == '/') {
			return false
		}
	}
	return true
}

// checkStrict reports whether b, one JSON value, keeps the strict rule; the
// error says where it does not.
func checkStrict(b []byte) error {
	var sn strictNote
	sn.reset()
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0, &sn)
	if err != nil || skipSpace(b, end) != len(b) {
		return errors.New("not valid JSON")
	}
	if sn.broken() {
		return errors.New(sn.describe(b))
	}
	return nil
}
