package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// FuzzDispatch sends any method with any params to an initialized
// extension. Whatever arrives, the answer is a result or a
// *protocol.Error: never a panic, never an error of another kind.
func FuzzDispatch(f *testing.F) {
	for _, seed := range []struct{ method, params string }{
		{"route.match", `{"handler":"demo","event":{"schema":"demo.note.v1","payload":{"text":"hi"}}}`},
		{"route.match", `{"handler":"demo","event":{"schema":"demo.note.v1","payload":"not an object"}}`},
		{"work_kind.trigger", `{"kind":"demo-review","inputs":[]}`},
		{"dependency.filter", `{"operation":"demo.await","event":{"schema":"demo.note.v2","payload":null}}`},
		{"operation.call", `{"operation":"demo.add","request_id":"r","input":{"text":"x"}}`},
		{"executor.stop", `{"executor":"demo-run","run_id":"r"}`},
		{"configure", `{"kv":{"stored":0,"declared":2}}`},
		{"shutdown", `{}`},
		{"no.such", `[]`},
	} {
		f.Add(seed.method, []byte(seed.params))
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		c, err := sdk.Attach((&demo{}).extension(), sdktest.New())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Call(ctx, "initialize", initParams, nil); err != nil {
			t.Fatal(err)
		}
		var out json.RawMessage
		err = c.Call(ctx, method, json.RawMessage(params), &out)
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s %s: error %T %v is not a *protocol.Error", method, params, err, err)
		}
	})
}
