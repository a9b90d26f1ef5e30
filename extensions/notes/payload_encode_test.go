package notes

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The current payload is written by hand when its strings are plain and
// by encoding/json otherwise; either way the bytes are json.Marshal's.

var encodedNotes = []struct {
	name  string
	note  Note
	plain bool // appendPlainNote writes it
}{
	{"one note", Note{ID: "n1", Title: "note 1"}, true},
	{"every field", Note{ID: "n1", Title: "t", Body: "b", Tags: []string{"x", "y"}, Link: "https://e.example/n1?a=1"}, true},
	{"empty", Note{}, true},
	{"empty tag", Note{ID: "n1", Tags: []string{""}}, true},
	{"quote", Note{ID: "n1", Title: `say "hi"`}, false},
	{"backslash", Note{ID: `n\1`}, false},
	{"html", Note{ID: "n1", Body: "<b>&</b>"}, false},
	{"html in a link", Note{ID: "n1", Link: "https://e.example/?a=1&b=2"}, false},
	{"control", Note{ID: "n1", Title: "a\nb"}, false},
	{"delete", Note{ID: "n1", Title: "a\x7fb"}, false},
	{"utf-8", Note{ID: "n1", Title: "é€😀"}, false},
	{"invalid utf-8", Note{ID: "n1", Title: "\xff"}, false},
	{"line separator", Note{ID: "n1", Body: "a\u2028b"}, false},
	{"tag to escape", Note{ID: "n1", Tags: []string{"ok", "<x>"}}, false},
}

func checkNoteEncode(t *testing.T, n Note) {
	t.Helper()
	want := n
	if want.Tags == nil {
		want.Tags = []string{}
	}
	wantJSON, err := json.Marshal(want)
	require.NoError(t, err)
	got, err := codec{version: 3}.encode(n)
	require.NoError(t, err)
	assert.Equal(t, string(wantJSON), string(got), "payload of %+v", n)
}

func TestEncodeAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range encodedNotes {
		t.Run(c.name, func(t *testing.T) {
			checkNoteEncode(t, c.note)
			n := c.note
			if n.Tags == nil {
				n.Tags = []string{}
			}
			_, plain := appendPlainNote(nil, n)
			assert.Equal(t, c.plain, plain, "written by hand")
		})
	}
}

// Whatever a sender's note holds, the payload is json.Marshal's.
func FuzzEncodeNote(f *testing.F) {
	for _, c := range encodedNotes {
		tag := ""
		if len(c.note.Tags) > 0 {
			tag = c.note.Tags[len(c.note.Tags)-1]
		}
		f.Add(c.note.ID, c.note.Title, c.note.Body, c.note.Link, tag, len(c.note.Tags))
	}
	f.Fuzz(func(t *testing.T, id, title, body, link, tag string, tags int) {
		n := Note{ID: id, Title: title, Body: body, Link: link}
		for range tags % 4 {
			n.Tags = append(n.Tags, tag)
		}
		checkNoteEncode(t, n)
	})
}
