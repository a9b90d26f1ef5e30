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
	var payload bytes.Buffer
	if len(env.Payload) == 0 {
		payload.WriteString("null")
	} else if err := canonicalJSON(&payload, env.Payload); err != nil {
		return "", fmt.Errorf("%w: payload: %v", ErrInvalid, err)
	}
	var occurred string
	if !env.OccurredAt.IsZero() {
		occurred = env.OccurredAt.UTC().Format(time.RFC3339Nano)
	}
	works := normaliseSet(env.Works)
	h := sha256.New()
	// Each field is length-prefixed, so no two distinct envelopes share
	// an input.
	for _, f := range []string{
		env.Source, env.DeliveryID, env.ScopeID, env.Family, env.Type,
		env.Schema, env.Parent, strings.Join(works, "\x00"), occurred,
		strconv.Itoa(len(works)), payload.String(),
	} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return signatureVersion + hex.EncodeToString(h.Sum(nil)), nil
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
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
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
