// Command ext-goplugin serves the workload over hashicorp/go-plugin and
// gRPC.
package main

import (
	"os"

	"github.com/hashicorp/go-plugin"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload"
	"github.com/open-conduit/open-conduit/prototypes/transport/workload/overplugin"
)

func main() {
	// go-plugin moves os.Stdout only inside Serve: print to whatever it is then.
	p := &workload.Peer{Stdout: stdoutNow{}, Crash: workload.CrashNow}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: overplugin.Handshake,
		Plugins:         plugin.PluginSet{overplugin.PluginName: &overplugin.ExtensionPlugin{Peer: p}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}

// stdoutNow writes to os.Stdout as it is at the time of the write.
type stdoutNow struct{}

func (stdoutNow) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
