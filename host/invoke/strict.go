package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a JSON document the host reads or sends.
const maxDepth = 128

// The refusals of the strict JSON rule. They name the rule, never the
// value.
var (
	errNotJSON       = errors.New("not JSON")
	errInvalidUTF8   = errors.New("invalid UTF-8")
	errLoneSurrogate = errors.New("an escaped half of a surrogate pair")
	errDuplicate     = errors.New("a duplicate member name")
	errNotFinite     = errors.New("a number out of the range of a float64")
	errTooDeep       = errors.New("nesting deeper than 128")
	errTrailing      = errors.New("more than one JSON value")
)

// checkStrict holds data to the strict JSON rule: exactly one JSON value
// (whitespace around it allowed), valid UTF-8, no escape of half a
// surrogate pair (which encoding/json would quietly read as U+FFFD), no
// duplicate member name in any object, every number finite as a float64,
// nesting of at most maxDepth.
func checkStrict(data []byte) error {
	if !utf8.Valid(data) {
		return errInvalidUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// Each open container: nil for an array, the member names seen for an
	// object.
	var stack []map[string]bool
	expectKey := false
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return errNotJSON
		}
		if len(stack) == 0 {
			values++
			if values > 1 {
				return errTrailing
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) == maxDepth {
					return errTooDeep
				}
				var names map[string]bool
				if t == '{' {
					names = map[string]bool{}
				}
				stack = append(stack, names)
				expectKey = t == '{'
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectKey {
				names := stack[len(stack)-1]
				if names[t] {
					return errDuplicate
				}
				names[t] = true
				expectKey = false
				continue
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); err != nil {
				return errNotFinite
			}
		}
		// A value ended: the next token of an object is a member name.
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
	if values == 0 {
		return errNotJSON
	}
	return checkSurrogates(data)
}

// checkSurrogates refuses a \u escape of half a surrogate pair that is not
// part of a whole pair. data is valid JSON, so every backslash is inside a
// string.
func checkSurrogates(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++
		if data[i] != 'u' {
			continue
		}
		r := hex4(data[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
				if low := hex4(data[i+3 : i+7]); low >= 0xDC00 && low < 0xE000 {
					i += 6
					continue
				}
			}
			return errLoneSurrogate
		case r >= 0xDC00 && r < 0xE000:
			return errLoneSurrogate
		}
	}
	return nil
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// isObject reports whether the JSON document data is an object.
func isObject(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
