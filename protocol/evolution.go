package protocol

import (
	"fmt"
	"strings"
)

// A payload schema id is <base>.v<N>: a base such as "notes.note" and a
// version N ≥ 1 written in decimal without leading zeros. An extension
// declares each of its bases in provides.schemas with the versions its
// release reads, oldest first; the last is the one it writes. Stored
// Events are never rewritten, so a release meets payloads of versions it
// no longer reads, or does not read yet, and PayloadStatus sorts them.

// maxSchemaVersionDigits keeps a version well inside int on every platform.
const maxSchemaVersionDigits = 9

// ParseSchema splits a schema id into its base and version. ok is false
// when id has no ".v<N>" suffix, N is 0 or has leading zeros or more than
// nine digits, or the base is empty or ends with a dot.
func ParseSchema(id string) (base string, version int, ok bool) {
	i := strings.LastIndex(id, ".v")
	if i <= 0 {
		return "", 0, false
	}
	base, digits := id[:i], id[i+2:]
	if strings.HasSuffix(base, ".") || digits == "" || len(digits) > maxSchemaVersionDigits || digits[0] == '0' {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return "", 0, false
		}
		version = version*10 + int(c-'0')
	}
	return base, version, true
}

// SchemaID is the id of version v of base: base + ".v" + v.
func SchemaID(base string, v int) string { return fmt.Sprintf("%s.v%d", base, v) }

// PayloadStatus classifies an Event's payload schema for one extension. The
// host applies it before any call, so whether a payload reaches an
// extension's decisions never depends on what its process does.
type PayloadStatus int

// The statuses, in the spec's order.
const (
	// Foreign: no schema, or a schema outside the extension's namespace.
	// The payload is passed verbatim; reading it is a data contract.
	Foreign PayloadStatus = iota + 1
	// Current: the version the extension writes. Passed.
	Current
	// Upcast: an older version the extension still lists. Passed verbatim;
	// the extension upcasts it to the current version before use.
	Upcast
	// Retired: one of the extension's bases at a version older than every
	// version it lists, or an older version it has dropped from its list.
	// Not passed for decisions.
	Retired
	// Newer: one of the extension's bases at a version newer than the one it
	// writes, persisted by a later release before a downgrade. Not passed
	// for decisions.
	Newer
	// Undeclared: in the extension's namespace, but with a base it does not
	// declare or with no valid version suffix. Not passed for decisions.
	Undeclared
)

var payloadStatusNames = [...]string{
	Foreign:    "foreign",
	Current:    "current",
	Upcast:     "upcast",
	Retired:    "retired",
	Newer:      "newer",
	Undeclared: "undeclared",
}

// String is the status's name as the spec writes it: "foreign", "current", …
func (s PayloadStatus) String() string {
	if s >= Foreign && s <= Undeclared {
		return payloadStatusNames[s]
	}
	return fmt.Sprintf("PayloadStatus(%d)", int(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s PayloadStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Readable reports whether a payload of status s is passed to the
// extension's decisions (route.match, dependency.filter, event.render):
// foreign, current and upcast are; retired, newer and undeclared are not,
// and the host answers for the extension instead (no match, false,
// generic rendering).
func Readable(s PayloadStatus) bool {
	return s == Foreign || s == Current || s == Upcast
}

// PayloadStatus classifies the payload schema id schema for the extension
// m describes. The answer depends on the id and the manifest only.
//
// An id is the extension's own when its base (or, without a valid version
// suffix, the whole id) is in the extension's namespace (see Namespace);
// "notesx.note.v1" is foreign to "notes". A declared base with no versions
// reads nothing, and is treated as undeclared. A version below the written
// one that the list skips is retired: no release step reads it any more.
func (m *Manifest) PayloadStatus(schema string) PayloadStatus {
	status, _ := m.payloadStatus(schema)
	return status
}

// payloadStatus is PayloadStatus plus the reason, for CheckWrite's message.
func (m *Manifest) payloadStatus(schema string) (PayloadStatus, string) {
	if schema == "" {
		return Foreign, "is absent"
	}
	name := ""
	if m != nil {
		name = m.Name
	}
	base, v, ok := ParseSchema(schema)
	if !ok {
		if Namespace(name, schema) {
			return Undeclared, "has no valid version suffix .v<N> (N ≥ 1, no leading zeros)"
		}
		return Foreign, fmt.Sprintf("is not in the namespace of %q", name)
	}
	if !Namespace(name, base) {
		return Foreign, fmt.Sprintf("is not in the namespace of %q", name)
	}
	versions := m.schemaVersions(base)
	if len(versions) == 0 {
		return Undeclared, fmt.Sprintf("has base %q, which provides.schemas does not declare", base)
	}
	written := versions[len(versions)-1]
	switch {
	case v == written:
		return Current, "is the written version"
	case v > written:
		return Newer, fmt.Sprintf("is newer than v%d, the version this release writes", written)
	case v < versions[0]:
		return Retired, fmt.Sprintf("is older than every version this release reads (%s)", formatVersions(versions))
	}
	for _, r := range versions {
		if r == v {
			return Upcast, fmt.Sprintf("is an older version; this release writes v%d", written)
		}
	}
	return Retired, fmt.Sprintf("is a version this release no longer reads (%s)", formatVersions(versions))
}

// schemaVersions is the declared versions of base, nil when undeclared.
func (m *Manifest) schemaVersions(base string) []int {
	if m == nil {
		return nil
	}
	for _, d := range m.Provides.Schemas {
		if d.Base == base {
			return d.Versions
		}
	}
	return nil
}

func formatVersions(vs []int) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("v%d", v)
	}
	return strings.Join(parts, ", ")
}

// CheckWrite checks a payload schema the extension m describes produces: in
// an ingress observation or event, event.accept, a kv.commit emission, a
// recurrence occurrence or an armed timer. Writes are strict: the schema
// must be absent or the current version of one of the extension's own
// bases. Anything else is an *Error coded unreadable_schema naming the
// schema and the reason (errors.Is(err, ErrUnreadableSchema) holds).
func (m *Manifest) CheckWrite(schema string) error {
	status, why := m.payloadStatus(schema)
	if schema == "" || status == Current {
		return nil
	}
	return Errorf(CodeUnreadableSchema, "cannot write payload schema %q: it %s (%s); a write must be absent or the current version of one of the extension's own schemas", schema, why, status)
}
