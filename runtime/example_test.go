package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// byTitle matches every Event whose payload has a title, correlating by it.
type byTitle struct{}

func (byTitle) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	var p struct{ Title string }
	if err := json.Unmarshal(in.Event.Payload, &p); err != nil || p.Title == "" {
		return runtime.RouteDecision{Reason: "no title"}, nil
	}
	return runtime.RouteDecision{Match: true, Reason: "payload has a title", CorrelationKeys: []string{"title:" + p.Title}, Display: &runtime.Display{Title: p.Title}}, nil
}

// An Event is accepted, routed to a new Work, and a second Event with the
// same title attaches to it.
func ExampleEngine() {
	dir, _ := os.MkdirTemp("", "engine-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(dir)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	engine, err := runtime.New(runtime.Config{
		Store:    store,
		Handlers: map[string]runtime.RouteHandler{"by-title": byTitle{}},
		Routes:   map[string][]runtime.Route{"team": {{Handler: "by-title", Kind: "triage"}}},
	})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	ctx := context.Background()
	evs, err := engine.Accept(ctx,
		runtime.Envelope{Source: "inbox", DeliveryID: "1", ScopeID: "team", Payload: json.RawMessage(`{"title":"Printer on fire"}`)},
		runtime.Envelope{Source: "inbox", DeliveryID: "2", ScopeID: "team", Payload: json.RawMessage(`{"title":"Printer on fire"}`)},
		runtime.Envelope{Source: "inbox", DeliveryID: "3", ScopeID: "team", Payload: json.RawMessage(`{}`)},
	)
	if err != nil {
		panic(err)
	}
	if _, err := engine.RoutePending(ctx); err != nil {
		panic(err)
	}
	for _, ev := range evs {
		rec, _ := engine.RouteRecordOf(ctx, ev.ID)
		fmt.Println(ev.DeliveryID, rec.Disposition, rec.Reason)
	}
	// Output:
	// 1 created payload has a title
	// 2 attached payload has a title
	// 3 unmatched no title
}
