// Command shell serves the shell executor on stdin and stdout, as the host
// runs it: go build ./extensions/shell/cmd/shell.
package main

import (
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/shell"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	if err := sdk.Serve(shell.Extension()); err != nil {
		fmt.Fprintln(os.Stderr, "shell:", err)
		os.Exit(1)
	}
}
