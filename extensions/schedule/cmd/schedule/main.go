// Command schedule serves the schedule extension on stdin and stdout, as
// the host runs it. It is built exactly as a third party would build an
// extension: go build ./extensions/schedule/cmd/schedule.
package main

import (
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extensions/schedule"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	if err := sdk.Serve(schedule.Extension()); err != nil {
		fmt.Fprintln(os.Stderr, "schedule:", err)
		os.Exit(1)
	}
}
