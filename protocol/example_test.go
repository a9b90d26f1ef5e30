package protocol_test

import (
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
)

func ExampleNegotiate() {
	v, err := protocol.Negotiate([]protocol.Version{1, 2}, []protocol.Version{2, 3})
	fmt.Println(v, err)

	_, err = protocol.Negotiate([]protocol.Version{1}, []protocol.Version{3})
	fmt.Println(errors.Is(err, protocol.ErrUnsupportedProtocolVersion), err)
	// Output:
	// 2 <nil>
	// true no common protocol version (ours [1], theirs [3])
}

func ExampleManifest_PayloadStatus() {
	m := &protocol.Manifest{
		Name: "notes",
		Provides: protocol.Provides{Schemas: []protocol.SchemaDecl{
			{Base: "notes.note", Versions: []int{1, 2}},
		}},
	}
	for _, schema := range []string{"", "runner.job.v1", "notes.note.v2", "notes.note.v1", "notes.note.v3", "notes.other.v1"} {
		fmt.Printf("%q: %s\n", schema, m.PayloadStatus(schema))
	}
	fmt.Println(m.CheckWrite("notes.note.v1"))
	// Output:
	// "": foreign
	// "runner.job.v1": foreign
	// "notes.note.v2": current
	// "notes.note.v1": upcast
	// "notes.note.v3": newer
	// "notes.other.v1": undeclared
	// cannot write payload schema "notes.note.v1": it is an older version; this release writes v2 (upcast); a write must be absent or the current version of one of the extension's own schemas
}

func ExampleEmittedEventID() {
	fmt.Println(protocol.EmittedEventID("notes/inbox", "d-1"))
	// Output:
	// evt_2eae9aca6e5e25afa4b6d895cac7767986d5546d303bd67dc56478e0a22d27cd
}

func ExampleNamespace() {
	fmt.Println(protocol.Namespace("notes", "notes.runs"), protocol.Namespace("notes", "notesx.runs"))
	fmt.Println(protocol.SourceNamespace("notes", "notes/inbox"), protocol.SourceNamespace("notes", "notes.inbox"))
	// Output:
	// true false
	// true false
}
