package runtime

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The validators below are the Store contract's input rules, exported so
// every implementation refuses the same input with the same errors. Each
// returns an error wrapping ErrInvalid or ErrTooLarge that names the field.

// ValidateNamespace checks a KV namespace: non-empty, at most
// MaxNamespaceBytes, valid UTF-8, no control characters.
func ValidateNamespace(ns string) error {
	return validateName("namespace", ns, MaxNamespaceBytes, true)
}

// ValidateKey checks a KV key: non-empty, at most MaxKeyBytes, valid UTF-8.
func ValidateKey(key string) error {
	return validateName("key", key, MaxKeyBytes, false)
}

// ValidateIdentifier checks a required identifier field: non-empty, at most
// MaxIdentifierBytes, valid UTF-8, no control characters.
func ValidateIdentifier(field, s string) error {
	return validateName(field, s, MaxIdentifierBytes, true)
}

// ValidateOptional checks an optional identifier or text field: empty, or
// at most MaxIdentifierBytes of valid UTF-8 without control characters.
func ValidateOptional(field, s string) error {
	if s == "" {
		return nil
	}
	return ValidateIdentifier(field, s)
}

// ValidateText checks free text (descriptions, progress, error messages):
// valid UTF-8 of at most MaxPayloadBytes.
func ValidateText(field, s string) error {
	if len(s) > MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, field, len(s), MaxPayloadBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	return nil
}

func validateName(field, s string, max int, noControl bool) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrInvalid, field, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, field, s)
	}
	if noControl {
		for _, r := range s {
			if unicode.IsControl(r) {
				return fmt.Errorf("%w: %s %q contains a control character", ErrInvalid, field, s)
			}
		}
	}
	return nil
}

// ValidateJSON checks an optional JSON document: absent, or one valid JSON
// value of valid UTF-8 without duplicate object keys, at most
// MaxPayloadBytes.
func ValidateJSON(field string, doc []byte) error {
	if len(doc) == 0 {
		return nil
	}
	if len(doc) > MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, field, len(doc), MaxPayloadBytes)
	}
	s := getSigning()
	defer putSigning(s)
	if err := s.canonical(&s.payload, doc); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
	}
	return nil
}

// ValidateNames checks each element of a set of identifiers.
func ValidateNames(field string, names []string) error {
	for _, n := range names {
		if err := ValidateIdentifier(field, n); err != nil {
			return err
		}
	}
	return nil
}

// ValidateEnvelope checks an envelope before acceptance and returns its
// signature.
func ValidateEnvelope(env Envelope) (signature string, err error) {
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
	// ValidateJSON's checks, with the canonical form made once: Signature
	// refuses a payload that is not one valid JSON value with the error
	// ValidateJSON gives it.
	if len(env.Payload) > MaxPayloadBytes {
		return "", fmt.Errorf("%w: payload is %d bytes, over %d", ErrTooLarge, len(env.Payload), MaxPayloadBytes)
	}
	return Signature(env)
}

// ValidateKVBatch checks a batch's shape: valid names, values within
// MaxKVValueBytes, each precondition naming exactly one of version or
// absence, and no key written twice.
func ValidateKVBatch(b KVBatch) error {
	for i, p := range b.Preconditions {
		if err := validateKVKey(p.Namespace, p.Key); err != nil {
			return fmt.Errorf("precondition %d: %w", i, err)
		}
		if (p.Version == "") == !p.Absent {
			return fmt.Errorf("%w: precondition %d on %s/%s must name a version or absence, not both or neither", ErrInvalid, i, p.Namespace, p.Key)
		}
	}
	written := map[KVKey]bool{}
	for i, p := range b.Puts {
		if err := validateKVKey(p.Namespace, p.Key); err != nil {
			return fmt.Errorf("put %d: %w", i, err)
		}
		if len(p.Value) > MaxKVValueBytes {
			return fmt.Errorf("%w: put %d: value of %s/%s is %d bytes, over %d", ErrTooLarge, i, p.Namespace, p.Key, len(p.Value), MaxKVValueBytes)
		}
		k := KVKey{p.Namespace, p.Key}
		if written[k] {
			return fmt.Errorf("%w: put %d: %s/%s is written twice in one batch", ErrInvalid, i, p.Namespace, p.Key)
		}
		written[k] = true
	}
	for i, d := range b.Deletes {
		if err := validateKVKey(d.Namespace, d.Key); err != nil {
			return fmt.Errorf("delete %d: %w", i, err)
		}
		if written[d] {
			return fmt.Errorf("%w: delete %d: %s/%s is written twice in one batch", ErrInvalid, i, d.Namespace, d.Key)
		}
		written[d] = true
	}
	return nil
}

func validateKVKey(ns, key string) error {
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	return ValidateKey(key)
}
