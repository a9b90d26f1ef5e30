package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// toolbeltCallDetails is `toolbelt call --help`'s text.
var toolbeltCallDetails = `The command-line toolbelt client (executor label "cli"): a run calls an operation its binding
grants. The endpoint and the run's token come from ` + protocol.ToolbeltEndpointEnv + ` and ` + protocol.ToolbeltTokenEnv + `, which
the executor sets for the run's process. INPUT is the operation's JSON input (absent for none).
The output is printed on stdout; a refusal prints its code and message on stderr.

flags:
  --request-id ID	name the call, so that a retry with the same ID replays its answer

Exit status: 0 for an output, 1 for a refusal (unauthorized for an operation the binding does not
grant, or a token that is not, or no longer, this run's), 2 for a usage error.
`

func toolbeltCallCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolbelt call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	requestID := fs.String("request-id", "", "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "open-conduit toolbelt call: %v\nusage: open-conduit toolbelt call [--request-id ID] OPERATION [INPUT]\n", err)
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) < 1 || len(rest) > 2 {
		fmt.Fprint(stderr, "open-conduit toolbelt call: one operation and at most one input\nusage: open-conduit toolbelt call [--request-id ID] OPERATION [INPUT]\n")
		return exitUsage
	}
	var input any
	if len(rest) == 2 {
		if !json.Valid([]byte(rest[1])) {
			fmt.Fprint(stderr, "open-conduit toolbelt call: INPUT is not JSON\n")
			return exitUsage
		}
		input = json.RawMessage(rest[1])
	}
	tb, err := sdk.ToolbeltFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "open-conduit toolbelt call: %v\n", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out, err := tb.Call(ctx, rest[0], *requestID, input)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			fmt.Fprintf(stderr, "%s: %s\n", pe.Code, pe.Message)
		} else {
			fmt.Fprintf(stderr, "open-conduit toolbelt call: %v\n", err)
		}
		return exitFail
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return exitOK
}
