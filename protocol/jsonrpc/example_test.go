package jsonrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

func Example() {
	hostR, extW := io.Pipe()
	extR, hostW := io.Pipe()

	// The extension's side serves one method...
	ext := jsonrpc.NewConn(extR, extW, jsonrpc.Methods{
		"greet": func(_ context.Context, req *jsonrpc.Request) (any, error) {
			var in struct {
				Name string `json:"name"`
			}
			if err := req.DecodeParams(&in); err != nil {
				return nil, err // answered as -32602
			}
			return "hello, " + in.Name, nil
		},
	}, nil)
	defer ext.Close()

	// ...and the host's side calls it.
	host := jsonrpc.NewConn(hostR, hostW, nil, nil)
	defer host.Close()

	var greeting string
	if err := host.Call(context.Background(), "greet", map[string]string{"name": "extension"}, &greeting); err != nil {
		fmt.Println(err)
	}
	fmt.Println(greeting)

	var rpcErr *jsonrpc.Error
	if err := host.Call(context.Background(), "no.such.method", nil, nil); errors.As(err, &rpcErr) {
		fmt.Println(rpcErr.Code, rpcErr.Message)
	}
	// Output:
	// hello, extension
	// -32601 method not found: "no.such.method"
}
