// Command ext-jsonrpc serves the workload over bare protocol/jsonrpc on its
// stdio: the project's transport with nothing of the SDK.
//
// TRANSPORT_WEAKEN=NAME makes it break one promise (overjsonrpc.Weakenings),
// for the negative controls of the semantic checks.
package main

import (
	"os"

	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overjsonrpc"
)

func main() {
	weaken := os.Getenv(overjsonrpc.WeakenEnv)
	// Stray prints must not reach the protocol stream.
	out := os.Stdout
	if weaken != "stdout_unmoved" {
		os.Stdout = os.Stderr
	}
	p := &workload.Peer{Stdout: os.Stdout, Crash: workload.CrashNow}
	conn := jsonrpc.NewConn(os.Stdin, out, overjsonrpc.Weaken(overjsonrpc.Methods(p), weaken), &jsonrpc.Options{
		DecodeError: overjsonrpc.DecodeError,
		ReuseParams: true,
		Inline:      overjsonrpc.Inline,
		Eager:       overjsonrpc.Eager,
	})
	<-conn.Done()
}
