package notes

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// SchemaBase is the base of the notes.note payload schema.
const SchemaBase = "notes.note"

// The three versions of a notes.note payload, one per release:
//
//	v1 (release 1): {"id", "text"}
//	v2 (release 2): {"id", "title", "body"}: text split at its first line
//	v3 (release 3): {"id", "title", "body", "tags", "link"}: tags always
//	                present, link optional
type (
	noteV1 struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	noteV2 struct {
		ID    string `json:"id"`
		Title string `json:"title"`
		Body  string `json:"body,omitempty"`
	}
	// Note is the current (v3) payload, and the form every handler works on.
	Note struct {
		ID    string   `json:"id"`
		Title string   `json:"title"`
		Body  string   `json:"body,omitempty"`
		Tags  []string `json:"tags"`
		Link  string   `json:"link,omitempty"`
	}
)

// upcasters are the SDK's steps between versions, keyed by the version
// they read.
var upcasters = map[string]sdk.Upcaster{
	SchemaBase + ".v1": upcastV1,
	SchemaBase + ".v2": upcastV2,
}

func upcastV1(p json.RawMessage) (json.RawMessage, error) {
	var v1 noteV1
	if err := json.Unmarshal(p, &v1); err != nil {
		return nil, fmt.Errorf("notes.note.v1: %w", err)
	}
	title, body, _ := strings.Cut(v1.Text, "\n")
	return json.Marshal(noteV2{ID: v1.ID, Title: title, Body: strings.TrimSpace(body)})
}

func upcastV2(p json.RawMessage) (json.RawMessage, error) {
	var v2 noteV2
	if err := json.Unmarshal(p, &v2); err != nil {
		return nil, fmt.Errorf("notes.note.v2: %w", err)
	}
	return json.Marshal(Note{ID: v2.ID, Title: v2.Title, Body: v2.Body, Tags: []string{}})
}

// codec is how one release writes and reads its own current payload
// version. Handlers see the release's current version only (the SDK
// upcasts older ones), and work on a Note.
type codec struct {
	version int
}

func (c codec) schema() string { return protocol.SchemaID(SchemaBase, c.version) }

// encode writes n in the release's current version.
func (c codec) encode(n Note) (json.RawMessage, error) {
	if n.Tags == nil {
		n.Tags = []string{}
	}
	switch c.version {
	case 1:
		text := n.Title
		if n.Body != "" {
			text += "\n" + n.Body
		}
		return json.Marshal(noteV1{ID: n.ID, Text: text})
	case 2:
		return json.Marshal(noteV2{ID: n.ID, Title: n.Title, Body: n.Body})
	default:
		if b, ok := appendPlainNote(nil, n); ok {
			return b, nil
		}
		return json.Marshal(n)
	}
}

// appendPlainNote appends what json.Marshal writes for n (Tags not nil)
// when every string in it is plain (plainJSON), and reports false for any
// other. A webhook delivery encodes one payload per note, and
// encoding/json's reflection was the largest part of making its draft.
func appendPlainNote(buf []byte, n Note) ([]byte, bool) {
	plain := plainJSON(n.ID) && plainJSON(n.Title) && plainJSON(n.Body) && plainJSON(n.Link)
	for _, t := range n.Tags {
		plain = plain && plainJSON(t)
	}
	if !plain || n.Tags == nil {
		return buf, false
	}
	buf = slices.Grow(buf, 48+len(n.ID)+len(n.Title)+len(n.Body)+len(n.Link)+4*len(n.Tags))
	buf = appendQuoted(append(buf, `{"id":`...), n.ID)
	buf = appendQuoted(append(buf, `,"title":`...), n.Title)
	if n.Body != "" {
		buf = appendQuoted(append(buf, `,"body":`...), n.Body)
	}
	buf = append(buf, `,"tags":[`...)
	for i, t := range n.Tags {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendQuoted(buf, t)
	}
	buf = append(buf, ']')
	if n.Link != "" {
		buf = appendQuoted(append(buf, `,"link":`...), n.Link)
	}
	return append(buf, '}'), true
}

// plainJSON reports whether json.Marshal writes s as it is between quotes:
// printable ASCII without '"', '\\' or the characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

func appendQuoted(buf []byte, s string) []byte {
	return append(append(append(buf, '"'), s...), '"')
}

// decode reads a payload of the release's current version into a Note.
func (c codec) decode(p json.RawMessage) (Note, error) {
	var err error
	for v := c.version; v < 3 && err == nil; v++ {
		p, err = upcasters[protocol.SchemaID(SchemaBase, v)](p)
	}
	var n Note
	if err == nil {
		err = json.Unmarshal(p, &n)
	}
	if err != nil {
		return Note{}, protocol.Errorf(protocol.CodeInvalid, "%s payload: %v", c.schema(), err)
	}
	if n.Tags == nil {
		n.Tags = []string{}
	}
	return n, nil
}
