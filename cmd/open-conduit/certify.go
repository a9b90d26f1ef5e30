package main

import (
	"context"
	"io"
	"os"
	"os/signal"

	"github.com/open-conduit/open-conduit/certify"
)

// certifyCommand is `open-conduit extension certify`: the certification
// runner wired to the real host, running packages whose command is
// protocol.HostRunCommand on this very executable.
func certifyCommand(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return certify.NewCommand("").Main(ctx, args, stdout, stderr)
}
