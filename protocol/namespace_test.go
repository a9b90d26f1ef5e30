package protocol_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestOwnership(t *testing.T) {
	cases := []struct {
		name                            string
		ext, s                          string
		namespace, source, owns, dotted bool
	}{
		{name: "the name itself", ext: "notes", s: "notes", namespace: true, source: true, owns: true},
		{name: "dotted suffix", ext: "notes", s: "notes.runs", namespace: true, dotted: true},
		{name: "deep dotted suffix", ext: "notes", s: "notes.projection.a", namespace: true, dotted: true},
		{name: "slash suffix", ext: "notes", s: "notes/inbox", source: true},
		{name: "deep slash suffix", ext: "notes", s: "notes/a/b", source: true},
		{name: "dash suffix", ext: "notes", s: "notes-sync", owns: true},
		{name: "empty dotted suffix", ext: "notes", s: "notes."},
		{name: "empty slash suffix", ext: "notes", s: "notes/"},
		{name: "empty dash suffix", ext: "notes", s: "notes-"},
		{name: "prefix only", ext: "notes", s: "notesx"},
		{name: "prefix only dotted", ext: "notes", s: "notesx.runs"},
		{name: "prefix only slash", ext: "notes", s: "notesx/a"},
		{name: "prefix only dash", ext: "notes", s: "notesx-a"},
		{name: "shorter", ext: "notes", s: "note"},
		{name: "other extension", ext: "notes", s: "runner.jobs"},
		{name: "case differs", ext: "notes", s: "Notes.runs"},
		{name: "underscore is not a separator", ext: "notes", s: "notes_runs"},
		{name: "empty", ext: "notes", s: ""},
		{name: "empty extension owns nothing", ext: "", s: ""},
		{name: "empty extension, dotted", ext: "", s: ".x"},
		{name: "empty extension, slash", ext: "", s: "/x"},
		{name: "empty extension, dash", ext: "", s: "-x"},
		{name: "extension in the middle", ext: "notes", s: "x.notes.y"},
		{name: "reserved core namespace", ext: "notes", s: "core.extensions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.namespace, protocol.Namespace(tc.ext, tc.s), "Namespace(%q, %q)", tc.ext, tc.s)
			assert.Equal(t, tc.source, protocol.SourceNamespace(tc.ext, tc.s), "SourceNamespace(%q, %q)", tc.ext, tc.s)
			assert.Equal(t, tc.owns, protocol.OwnsName(tc.ext, tc.s), "OwnsName(%q, %q)", tc.ext, tc.s)
			assert.Equal(t, tc.dotted, protocol.OwnsDotted(tc.ext, tc.s), "OwnsDotted(%q, %q)", tc.ext, tc.s)
		})
	}
}

func TestValidNamespace(t *testing.T) {
	valid := []string{
		"notes",
		"notes.runs",
		"notes.projection.Éte",
		"notes with space",
		strings.Repeat("n", protocol.MaxNamespaceBytes),
	}
	for _, ns := range valid {
		assert.NoError(t, protocol.ValidNamespace(ns), "%q", ns)
	}
	invalid := map[string]string{
		"empty":             "",
		"too long":          strings.Repeat("n", protocol.MaxNamespaceBytes+1),
		"too long in bytes": strings.Repeat("é", protocol.MaxNamespaceBytes/2+1),
		"invalid UTF-8":     "notes.\xff",
		"newline":           "notes.\n",
		"tab":               "notes\t",
		"NUL":               "notes\x00",
		"DEL":               "notes\x7f",
		"C1 control":        "notes\u0085",
		"bidi override":     "notes\u202e",
		"zero width":        "notes\u200b",
		"line separator":    "notes\u2028",
	}
	for name, ns := range invalid {
		t.Run(name, func(t *testing.T) {
			err := protocol.ValidNamespace(ns)
			assert.ErrorIs(t, err, protocol.ErrInvalid)
		})
	}
}

func TestIsIdentifier(t *testing.T) {
	for _, s := range []string{"a", "notes", "open-conduit", "note_sync", "n2", "a-b_c-9", strings.Repeat("a", protocol.MaxIdentifierBytes)} {
		assert.True(t, protocol.IsIdentifier(s), "%q", s)
	}
	for _, s := range []string{
		"", "Notes", "9lives", "-a", "_a", "a-", "a_", "a.b", "a/b", "a b", "é", "a\n",
		strings.Repeat("a", protocol.MaxIdentifierBytes+1),
	} {
		assert.False(t, protocol.IsIdentifier(s), "%q", s)
	}
}
