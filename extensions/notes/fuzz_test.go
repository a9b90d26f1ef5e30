package notes_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// FuzzPush feeds webhook bodies, which come from outside, to the notes
// source: each is refused as invalid or turned into Events the host can
// accept, never a crash or an internal error.
func FuzzPush(f *testing.F) {
	f.Add([]byte(`{"notes":[{"id":"a","rev":"1","title":"t"}]}`))
	f.Add([]byte(`{"notes":[{"id":"../x","rev":"1"}]}`))
	f.Add([]byte(`{"notes":null}`))
	f.Add([]byte(`not json`))
	ctx := context.Background()
	c, err := sdk.Attach(notes.Extension(), sdktest.New())
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}, StateDir: f.TempDir()}, nil); err != nil {
		f.Fatal(err)
	}
	if err := c.Call(ctx, "configure", configure(2, 2), nil); err != nil {
		f.Fatal(err)
	}
	m, err := protocol.ParseManifest(notes.Extension().Manifest)
	if err != nil {
		f.Fatal(err)
	}
	source := notes.SourceName("team", "inbox")
	f.Fuzz(func(t *testing.T, body []byte) {
		var res protocol.IngressPushResult
		err := c.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: notes.Name, Source: source, ScopeID: "team",
			Delivery: protocol.Delivery{Body: body}}, &res)
		if err != nil {
			if !errors.Is(err, protocol.ErrInvalid) {
				t.Fatalf("body %q: %v, want invalid or events", body, err)
			}
			return
		}
		for _, ev := range res.Events {
			if ev.Source != source || ev.Family != notes.FamilyNote || m.CheckWrite(ev.Schema) != nil || !json.Valid(ev.Payload) {
				t.Fatalf("body %q gave an event the host would refuse: %+v", body, ev)
			}
			if id, _, ok := strings.Cut(ev.DeliveryID, "@"); !ok || id == "" || strings.ContainsAny(id, `/\`) {
				t.Fatalf("body %q gave delivery id %q", body, ev.DeliveryID)
			}
		}
	})
}
