// Command ext-jsonrpc serves the workload over bare protocol/jsonrpc on its
// stdio: the project's transport with nothing of the SDK.
package main

import (
	"os"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overjsonrpc"
)

func main() {
	// Stray prints must not reach the protocol stream.
	out := os.Stdout
	os.Stdout = os.Stderr
	p := &workload.Peer{Stdout: os.Stdout, Crash: workload.CrashNow}
	conn := jsonrpc.NewConn(os.Stdin, out, overjsonrpc.Methods(p), &jsonrpc.Options{
		DecodeError: overjsonrpc.DecodeError,
		ReuseParams: true,
	})
	<-conn.Done()
}
