// Command minimalext is the smallest package the daemon's start tests and
// benchmarks run: it serves the manifest in its working directory with the
// SDK and nothing else, so a start costs the daemon's work and a small
// process, not a test binary's start-up.
//
//	minimalext minimal          answer at once
//	minimalext slow             take slowHandshake to initialize
//	minimalext barrier SOCKET   answer initialize once the test writes to SOCKET
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// slowHandshake is how long a "slow" package takes to initialize; the
// benchmarks name it host/daemon's slowHandshake.
const slowHandshake = 100 * time.Millisecond

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: minimalext minimal|slow|barrier SOCKET")
	}
	raw, err := os.ReadFile(protocol.ManifestFile)
	if err != nil {
		return err
	}
	mode := args[0]
	return sdk.Serve(&sdk.Extension{Manifest: raw,
		Initialize: func(context.Context, protocol.InitializeParams) error {
			switch mode {
			case "slow":
				// A handshake that waits on something outside the process
				// (an interpreter loading, a remote check).
				time.Sleep(slowHandshake)
			case "barrier":
				// Answer only once the test releases every package: it does
				// so when all of them are in initialize.
				c, err := net.Dial("unix", args[1])
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Read(make([]byte, 1))
				return err
			}
			return nil
		},
		Configure: func(context.Context, *sdk.Host, protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{}, nil
		}})
}
