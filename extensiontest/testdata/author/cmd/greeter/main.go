// Command greeter serves release 1 of the greeter extension.
package main

import (
	_ "embed"
	"fmt"
	"os"

	"example.com/greeter/greeter"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

//go:embed open-conduit-extension.json
var manifest []byte

func main() {
	if err := sdk.Serve(greeter.Extension(manifest, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "greeter:", err)
		os.Exit(1)
	}
}
