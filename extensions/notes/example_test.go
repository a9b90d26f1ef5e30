package notes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// Release 3 routes an Event stored by release 1: the SDK upcasts its
// notes.note.v1 payload to v3 before the route handler sees it.
func Example() {
	ctx := context.Background()
	c, err := sdk.Attach(notes.Extension(), sdktest.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: os.TempDir()}, nil)
	var res protocol.RouteMatchResult
	_ = c.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: notes.Name, ScopeID: "team", Event: protocol.Event{
		ID: "ev-1", Family: notes.FamilyNote, Schema: "notes.note.v1",
		Payload: json.RawMessage(`{"id":"n1","text":"Plan the launch\nby Friday"}`)}}, &res)
	fmt.Println(res.Match, res.Kind, res.CorrelationKeys)
	fmt.Printf("%q %q\n", res.Display.Title, res.Display.Ref)
	// Output:
	// true notes-review [notes:n1]
	// "Plan the launch" "n1"
}
