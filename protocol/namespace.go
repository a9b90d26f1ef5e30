package protocol

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNamespaceBytes bounds the length of a KV namespace.
const MaxNamespaceBytes = 128

// MaxIdentifierBytes bounds the length of an identifier.
const MaxIdentifierBytes = 64

// The ownership rules below are the whole of an extension's naming
// authority. The host applies them to every call with the name it started
// the process under; an extension never states who it is.

// Namespace reports whether the KV namespace ns belongs to the extension
// named ext: ext itself, or ext + "." + a non-empty suffix. It checks
// ownership only; ValidNamespace checks the form.
func Namespace(ext, ns string) bool {
	return ext != "" && (ns == ext || hasSuffixAfter(ns, ext, '.'))
}

// SourceNamespace reports whether the ingress or emission source belongs to
// the extension named ext: ext itself, or ext + "/" + a non-empty suffix.
func SourceNamespace(ext, source string) bool {
	return ext != "" && (source == ext || hasSuffixAfter(source, ext, '/'))
}

// OwnsName reports whether an identifier-shaped name (a type, handler,
// executor, provider, task, work kind and the like) belongs to the
// extension named ext: ext itself, or ext + "-" + a non-empty suffix.
func OwnsName(ext, name string) bool {
	return ext != "" && (name == ext || hasSuffixAfter(name, ext, '-'))
}

// OwnsDotted reports whether a dotted name (a family, operation, toolset or
// payload schema base) belongs to the extension named ext: ext + "." + a
// non-empty suffix. The bare name is not a dotted name.
func OwnsDotted(ext, name string) bool {
	return ext != "" && hasSuffixAfter(name, ext, '.')
}

// hasSuffixAfter reports whether s is prefix, then sep, then at least one byte.
func hasSuffixAfter(s, prefix string, sep byte) bool {
	return len(s) > len(prefix)+1 && s[len(prefix)] == sep && strings.HasPrefix(s, prefix)
}

// ValidNamespace checks the form of a KV namespace: non-empty, at most
// MaxNamespaceBytes, valid UTF-8 and printable (no control or format
// characters; the ASCII space is allowed). A refusal is an *Error coded
// invalid whose message says what is wrong, so it crosses the wire intact.
func ValidNamespace(ns string) error {
	switch {
	case ns == "":
		return Errorf(CodeInvalid, "namespace is empty")
	case len(ns) > MaxNamespaceBytes:
		return Errorf(CodeInvalid, "namespace is %d bytes, over the limit of %d", len(ns), MaxNamespaceBytes)
	case !utf8.ValidString(ns):
		return Errorf(CodeInvalid, "namespace %q is not valid UTF-8", ns)
	}
	for i, r := range ns {
		if !unicode.IsPrint(r) {
			return Errorf(CodeInvalid, "namespace %q has an unprintable character %U at byte %d", ns, r, i)
		}
	}
	return nil
}

// IsIdentifier reports whether s is an identifier: 1 to MaxIdentifierBytes
// bytes of lower-case ASCII letters, digits, '-' and '_', starting with a
// letter and ending with a letter or digit. Extension names and the
// identifier-shaped names they own have this form.
func IsIdentifier(s string) bool {
	if s == "" || len(s) > MaxIdentifierBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9', c == '-', c == '_':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	last := s[len(s)-1]
	return last != '-' && last != '_'
}
