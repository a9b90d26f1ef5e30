// Command notes serves the notes example extension on stdin and stdout,
// as the host runs it. It is built exactly as a third party would build
// an extension: go build ./extensions/notes/cmd/notes.
package main

import (
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	if err := sdk.Serve(notes.Extension()); err != nil {
		fmt.Fprintln(os.Stderr, "notes:", err)
		os.Exit(1)
	}
}
