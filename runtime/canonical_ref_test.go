package runtime

// The canonical form as it was before its fast path (canonical.go,
// appendCanonical), kept word for word as the reference the differential
// tests hold the new code to: for every input the new canonicalJSON and
// Signature must answer exactly what these do, the same bytes or the same
// error.

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

func oldSignature(env Envelope) (string, error) {
	var payload bytes.Buffer
	if len(env.Payload) == 0 {
		payload.WriteString("null")
	} else if err := oldCanonicalJSON(&payload, env.Payload); err != nil {
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

func oldCanonicalJSON(dst *bytes.Buffer, data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := oldCanonicalValue(dst, dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not a single JSON value")
	}
	return nil
}

func oldCanonicalValue(dst *bytes.Buffer, dec *json.Decoder, depth int) error {
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
				if err := oldCanonicalValue(&val, dec, depth+1); err != nil {
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
				oldWriteJSONString(dst, m.key)
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
				if err := oldCanonicalValue(dst, dec, depth+1); err != nil {
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
		oldWriteJSONString(dst, v)
	case json.Number:
		n, err := oldCanonicalNumber(string(v))
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

func oldWriteJSONString(dst *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a valid UTF-8 string always marshals
	dst.Write(b)
}

// canonicalNumber rewrites a JSON number as <sign><digits>e<exponent> with
// no leading or trailing zeros in digits, or "0": an exact form in which
// every spelling of one value is equal. It never converts to a float, so
// large integers and long fractions keep every digit.
func oldCanonicalNumber(s string) (string, error) {
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

// oldValidateEnvelope is ValidateEnvelope as it was: ValidateJSON's
// canonical pass, then Signature's.
func oldValidateEnvelope(env Envelope) (string, error) {
	if err := ValidateIdentifier("source", env.Source); err != nil {
		return "", err
	}
	if err := ValidateIdentifier("delivery_id", env.DeliveryID); err != nil {
		return "", err
	}
	for _, f := range []struct{ name, value string }{
		{"id", env.ID}, {"scope_id", env.ScopeID}, {"family", env.Family},
		{"type", env.Type}, {"schema", env.Schema}, {"parent", env.Parent},
	} {
		if err := ValidateOptional(f.name, f.value); err != nil {
			return "", err
		}
	}
	if err := ValidateNames("works", env.Works); err != nil {
		return "", err
	}
	if len(env.Payload) > 0 {
		if len(env.Payload) > MaxPayloadBytes {
			return "", fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, "payload", len(env.Payload), MaxPayloadBytes)
		}
		var buf bytes.Buffer
		if err := oldCanonicalJSON(&buf, env.Payload); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrInvalid, "payload", err)
		}
	}
	return oldSignature(env)
}
