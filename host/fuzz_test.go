package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// FuzzServiceCall feeds the host service what an extension may send: any
// method with any params. The service must never panic, and every refusal
// must be a *protocol.Error, so it crosses the wire with a stable code.
func FuzzServiceCall(f *testing.F) {
	for _, s := range []struct{ method, params string }{
		{"kv.get", `{"namespace":"mine","key":"k"}`},
		{"kv.commit", `{"puts":[{"namespace":"mine","key":"k","value":1}],"emissions":[{"source":"mine/in","delivery_id":"d","scope_id":"s1","family":"mine.note"}]}`},
		{"kv.list", `{"namespace":"mine","limit":-5}`},
		{"state.events", `{"after":-1}`},
		{"event.accept", `{"parent":"x"}`},
		{"timer.arm", `{"key":"k","recurrence":"mine-tick","scope_id":"s1","due":"2030-01-01T00:00:00Z"}`},
		{"secret.resolve", `{"connection":"mine-conn"}`},
		{"ingress.deliver", `{"source":"mine/in","events":[{"delivery_id":"d","family":"mine.note"}]}`},
		{"route.match", `{}`},
		{"kv.get", `[1,2`},
	} {
		f.Add(s.method, []byte(s.params))
	}
	st, err := sqlite.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	m, err := protocol.ParseManifest(manifestJSON("mine", "good", provideAll("mine"), nil))
	if err != nil {
		f.Fatal(err)
	}
	svc := host.NewService(host.ServiceConfig{Manifest: m, Store: st, Secrets: secrets{}})
	if err := svc.Configure(configureFor("mine", "s1"), protocol.ConfigureResult{
		Sources: []protocol.SourceDecl{{Name: "mine/in", ScopeID: "s1", Families: []string{"mine.note"}}}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		var out json.RawMessage
		err := svc.Call(context.Background(), method, json.RawMessage(params), &out)
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s: a refusal that is not a *protocol.Error: %T %v", method, err, err)
		}
	})
}
