package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestParseSchema(t *testing.T) {
	cases := []struct {
		id      string
		base    string
		version int
		ok      bool
	}{
		{"notes.note.v1", "notes.note", 1, true},
		{"notes.note.v12", "notes.note", 12, true},
		{"notes.v1", "notes", 1, true},
		{"notes.v1.v2", "notes.v1", 2, true},
		{"a.v999999999", "a", 999999999, true},
		{"notes.note", "", 0, false},
		{"notes.note.v", "", 0, false},
		{"notes.note.v0", "", 0, false},
		{"notes.note.v01", "", 0, false},
		{"notes.note.v-1", "", 0, false},
		{"notes.note.v+1", "", 0, false},
		{"notes.note.v1a", "", 0, false},
		{"notes.note.v1 ", "", 0, false},
		{"notes.note.V1", "", 0, false},
		{"notes.note.v1000000000", "", 0, false},
		{"notes.note.v99999999999999999999", "", 0, false},
		{"notes.note.v١", "", 0, false},
		{".v1", "", 0, false},
		{"notes..v1", "", 0, false},
		{"v1", "", 0, false},
		{"", "", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			base, v, ok := protocol.ParseSchema(tc.id)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.base, base)
			assert.Equal(t, tc.version, v)
			if ok {
				assert.Equal(t, tc.id, protocol.SchemaID(base, v), "SchemaID does not invert ParseSchema")
			}
		})
	}
}

func FuzzParseSchema(f *testing.F) {
	for _, s := range []string{"notes.note.v1", "notes.note.v01", "a.v1.v2", ".v1", "x.v99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		base, v, ok := protocol.ParseSchema(id)
		if !ok {
			return
		}
		if v < 1 || base == "" {
			t.Fatalf("ParseSchema(%q) = %q, %d, true", id, base, v)
		}
		if got := protocol.SchemaID(base, v); got != id {
			t.Fatalf("SchemaID(ParseSchema(%q)) = %q", id, got)
		}
	})
}

func notesManifest() *protocol.Manifest {
	return &protocol.Manifest{
		Name:     "notes",
		Version:  "3.0.0",
		Protocol: []protocol.Version{protocol.Version1},
		Provides: protocol.Provides{Schemas: []protocol.SchemaDecl{
			{Base: "notes.note", Versions: []int{2, 3, 5}},
			{Base: "notes.run", Versions: []int{1}},
			{Base: "notes.empty", Versions: nil},
		}},
	}
}

func TestPayloadStatus(t *testing.T) {
	m := notesManifest()
	cases := []struct {
		name   string
		schema string
		want   protocol.PayloadStatus
	}{
		{"absent", "", protocol.Foreign},
		{"another extension's schema", "runner.job.v1", protocol.Foreign},
		{"core schema", "core.config.tunnel.v2", protocol.Foreign},
		{"prefix-only match", "notesx.note.v1", protocol.Foreign},
		{"prefix-only match without suffix", "notesx.note", protocol.Foreign},
		{"prefix-only match with dash", "notes-x.note.v1", protocol.Foreign},
		{"foreign with bad suffix", "runner.job.v0", protocol.Foreign},
		{"written version", "notes.note.v5", protocol.Current},
		{"only version", "notes.run.v1", protocol.Current},
		{"older listed version", "notes.note.v3", protocol.Upcast},
		{"oldest listed version", "notes.note.v2", protocol.Upcast},
		{"older than every listed version", "notes.note.v1", protocol.Retired},
		{"dropped between listed versions", "notes.note.v4", protocol.Retired},
		{"newer than written", "notes.note.v6", protocol.Newer},
		{"much newer than written", "notes.run.v40", protocol.Newer},
		{"undeclared base", "notes.other.v1", protocol.Undeclared},
		{"bare name as base", "notes.v1", protocol.Undeclared},
		{"declared base without versions", "notes.empty.v1", protocol.Undeclared},
		{"no suffix", "notes.note", protocol.Undeclared},
		{"bare name", "notes", protocol.Undeclared},
		{"v0", "notes.note.v0", protocol.Undeclared},
		{"leading zero", "notes.note.v05", protocol.Undeclared},
		{"empty version", "notes.note.v", protocol.Undeclared},
		{"upper-case V", "notes.note.V5", protocol.Undeclared},
		{"base with trailing dot", "notes.note..v5", protocol.Undeclared},
		{"case differs", "Notes.note.v5", protocol.Foreign},
	}
	seen := map[protocol.PayloadStatus]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := m.PayloadStatus(tc.schema)
			assert.Equal(t, tc.want, got, "PayloadStatus(%q) = %s", tc.schema, got)
			assert.Equal(t, got, m.PayloadStatus(tc.schema), "not deterministic")
			seen[got] = true
		})
	}
	for _, s := range allStatuses {
		assert.True(t, seen[s], "no case yields %s", s)
	}
}

func TestPayloadStatusNilManifest(t *testing.T) {
	var m *protocol.Manifest
	assert.Equal(t, protocol.Foreign, m.PayloadStatus("notes.note.v1"))
	assert.Equal(t, protocol.Foreign, m.PayloadStatus(""))
	assert.ErrorIs(t, m.CheckWrite("notes.note.v1"), protocol.ErrUnreadableSchema)
}

var allStatuses = []protocol.PayloadStatus{
	protocol.Foreign, protocol.Current, protocol.Upcast, protocol.Retired, protocol.Newer, protocol.Undeclared,
}

func TestPayloadStatusNames(t *testing.T) {
	want := []string{"foreign", "current", "upcast", "retired", "newer", "undeclared"}
	for i, s := range allStatuses {
		assert.Equal(t, want[i], s.String())
		text, err := s.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, want[i], string(text))
	}
	assert.Equal(t, "PayloadStatus(0)", protocol.PayloadStatus(0).String())
	assert.Equal(t, "PayloadStatus(99)", protocol.PayloadStatus(99).String())
}

func TestReadable(t *testing.T) {
	want := map[protocol.PayloadStatus]bool{
		protocol.Foreign:    true,
		protocol.Current:    true,
		protocol.Upcast:     true,
		protocol.Retired:    false,
		protocol.Newer:      false,
		protocol.Undeclared: false,
	}
	for _, s := range allStatuses {
		assert.Equal(t, want[s], protocol.Readable(s), "%s", s)
	}
	assert.False(t, protocol.Readable(0))
}

func TestCheckWrite(t *testing.T) {
	m := notesManifest()
	assert.NoError(t, m.CheckWrite(""), "an absent schema is always writable")
	assert.NoError(t, m.CheckWrite("notes.note.v5"))
	assert.NoError(t, m.CheckWrite("notes.run.v1"))

	refused := map[string]string{
		"runner.job.v1":  `cannot write payload schema "runner.job.v1": it is not in the namespace of "notes" (foreign)`,
		"notesx.note.v1": `cannot write payload schema "notesx.note.v1": it is not in the namespace of "notes" (foreign)`,
		"notes.note.v3":  `cannot write payload schema "notes.note.v3": it is an older version; this release writes v5 (upcast)`,
		"notes.note.v1":  `cannot write payload schema "notes.note.v1": it is older than every version this release reads (v2, v3, v5) (retired)`,
		"notes.note.v4":  `cannot write payload schema "notes.note.v4": it is a version this release no longer reads (v2, v3, v5) (retired)`,
		"notes.note.v6":  `cannot write payload schema "notes.note.v6": it is newer than v5, the version this release writes (newer)`,
		"notes.other.v1": `cannot write payload schema "notes.other.v1": it has base "notes.other", which provides.schemas does not declare (undeclared)`,
		"notes.note":     `cannot write payload schema "notes.note": it has no valid version suffix .v<N> (N ≥ 1, no leading zeros) (undeclared)`,
		"notes.note.v05": `cannot write payload schema "notes.note.v05": it has no valid version suffix .v<N> (N ≥ 1, no leading zeros) (undeclared)`,
	}
	for schema, prefix := range refused {
		t.Run(schema, func(t *testing.T) {
			err := m.CheckWrite(schema)
			require.Error(t, err)
			assert.ErrorIs(t, err, protocol.ErrUnreadableSchema)
			assert.Equal(t, protocol.CodeUnreadableSchema, protocol.CodeOf(err))
			assert.Contains(t, err.Error(), prefix)
		})
	}
}
