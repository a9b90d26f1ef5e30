// Command agent serves the scripted agent on stdin and stdout, as the host
// runs it: go build ./extensions/agent/cmd/agent (the binary serves the
// same as "open-conduit extension-run agent").
package main

import (
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/agent"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	if err := sdk.Serve(agent.Extension()); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
