package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

// greeterManifest would be open-conduit-extension.json, embedded with
// //go:embed in a real extension.
const greeterManifest = `{
  "name": "greeter",
  "version": "1.0.0",
  "command": ["greeter"],
  "protocol": [1],
  "provides": {
    "routes": [{"handler": "greeter"}],
    "operations": [{"name": "greeter.greet", "kind": "handler"}],
    "schemas": [{"base": "greeter.hello", "versions": [1, 2]}]
  }
}`

// greeter is a small extension: a route that matches hellos and an
// operation that counts greetings in KV.
func greeter() *sdk.Extension {
	return &sdk.Extension{
		Manifest: []byte(greeterManifest),
		// Version 1 of greeter.hello was {"name"}; version 2 is {"who"}.
		Upcasters: map[string]sdk.Upcaster{
			"greeter.hello.v1": func(p json.RawMessage) (json.RawMessage, error) {
				var v1 struct{ Name string }
				if err := json.Unmarshal(p, &v1); err != nil {
					return nil, err
				}
				return json.Marshal(map[string]string{"who": v1.Name})
			},
		},
		Routes: map[string]sdk.Route{"greeter": {
			Match: func(ctx context.Context, p protocol.RouteMatchParams) (protocol.RouteMatchResult, error) {
				var hello struct{ Who string }
				if err := json.Unmarshal(p.Event.Payload, &hello); err != nil {
					return protocol.RouteMatchResult{}, err
				}
				return protocol.RouteMatchResult{Match: true, Kind: "greeter", Reason: "hello from " + hello.Who}, nil
			},
		}},
		Operations: map[string]sdk.Operation{"greeter.greet": {
			Handler: func(ctx context.Context, host *sdk.Host, call protocol.OperationCallParams) (protocol.OperationCallResult, error) {
				var count int
				_, err := host.Update(ctx, func(t *sdk.Txn) error {
					if _, err := t.GetJSON("greeter", "count", &count); err != nil {
						return err
					}
					count++
					return t.Put("greeter", "count", count)
				})
				out, _ := json.Marshal(map[string]int{"greetings": count})
				return protocol.OperationCallResult{Output: out}, err
			},
		}},
	}
}

// Attach serves an extension in the host's own process: the host calls it
// with Go values of the wire types, and its Host calls the host the same
// way. An older payload reaches the route upcast to the current version.
func ExampleAttach() {
	ctx := context.Background()
	ext, err := sdk.Attach(greeter(), sdktest.New())
	if err != nil {
		panic(err)
	}
	var init protocol.InitializeResult
	if err := ext.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, &init); err != nil {
		panic(err)
	}
	fmt.Println("protocol version", init.ProtocolVersion)

	var decision protocol.RouteMatchResult
	err = ext.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "greeter", Event: protocol.Event{
		ID: "evt_1", Schema: "greeter.hello.v1", Payload: json.RawMessage(`{"name":"Ada"}`),
	}}, &decision)
	if err != nil {
		panic(err)
	}
	fmt.Println(decision.Match, decision.Reason)

	// A payload from a newer release never reaches the handler.
	err = ext.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: "greeter", Event: protocol.Event{
		ID: "evt_2", Schema: "greeter.hello.v3", Payload: json.RawMessage(`{}`),
	}}, &decision)
	if err != nil {
		panic(err)
	}
	fmt.Println(decision.Match, decision.Reason)
	// Output:
	// protocol version 1
	// true hello from Ada
	// false payload schema "greeter.hello.v3" is newer for this release; not passed to the handler
}

// ServeConn serves an extension over a pair of streams, as Serve does over
// stdin and stdout. The host's side is a jsonrpc.Conn whose handler
// serves the extension's calls to the host.
func ExampleServeConn() {
	ctx := context.Background()
	toExtR, toExtW := io.Pipe()
	fromExtR, fromExtW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- sdk.ServeConn(ctx, toExtR, fromExtW, greeter()) }()

	host := sdktest.New()
	conn := jsonrpc.NewConn(fromExtR, toExtW, host.Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	if err := conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: []protocol.Version{1}}, nil); err != nil {
		panic(err)
	}
	for range 2 {
		var r protocol.OperationCallResult
		err := conn.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: "greeter.greet"}, &r)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(r.Output))
	}
	err := conn.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: "greeter"}, nil)
	fmt.Println(protocol.CodeOf(err))

	conn.Close() // end of input: the extension returns
	fmt.Println(<-done)
	// Output:
	// {"greetings":1}
	// {"greetings":2}
	// undeclared
	// <nil>
}

// Update re-reads and retries when another writer got there first, so
// the increment is never lost.
func ExampleHost_Update() {
	ctx := context.Background()
	fake := sdktest.New()
	fake.SetKV("greeter", "count", json.RawMessage(`1`))
	host := sdk.NewHost(fake, nil)

	attempts := 0
	_, err := host.Update(ctx, func(t *sdk.Txn) error {
		attempts++
		var n int
		if _, err := t.GetJSON("greeter", "count", &n); err != nil {
			return err
		}
		if attempts == 1 {
			fake.SetKV("greeter", "count", json.RawMessage(`5`)) // someone else wrote
		}
		return t.Put("greeter", "count", n+1)
	})
	fmt.Println(attempts, string(fake.KV("greeter", "count")), err)
	// Output: 2 6 <nil>
}

// Once makes an operation's effect happen once per request id, however
// often the call is retried.
func ExampleOnce() {
	ctx := context.Background()
	m, err := protocol.ParseManifest([]byte(greeterManifest))
	if err != nil {
		panic(err)
	}
	host := sdk.NewHost(sdktest.New(), m)
	posted := 0
	post := func(ctx context.Context, in sdk.Intent) (json.RawMessage, error) {
		posted++ // the effect: post a comment carrying in.Key
		return json.RawMessage(`{"comment":1}`), nil
	}
	for range 3 { // the same call, retried
		out, err := sdk.Once(ctx, host, "req-42", post)
		fmt.Println(string(out), err)
	}
	fmt.Println("posted", posted)
	// Output:
	// {"comment":1} <nil>
	// {"comment":1} <nil>
	// {"comment":1} <nil>
	// posted 1
}

// IntentKey names one effect of one call, the same in every process.
func ExampleIntentKey() {
	fmt.Println(sdk.IntentKey("req-42", "comment"))
	fmt.Println(sdk.IntentKey("req-42", "comment") == sdk.IntentKey("req-42", "label"))
	// Output:
	// intent-6b08c51dd5af496b703e00131cd49188
	// false
}
