// Command runner serves the runner example executor on stdin and stdout,
// as the host runs it: go build ./extensions/runner/cmd/runner.
package main

import (
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/runner"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	if err := sdk.Serve(runner.Extension()); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}
