package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/testbin"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// slowHandshake is how long a "child:slow" package takes to initialize.
const slowHandshake = 100 * time.Millisecond

// TestMain lets the test binary serve as a package process: run as
// "child:minimal" in a package directory, it serves that directory's
// manifest with the SDK and nothing else (the start benchmarks' packages);
// "child:slow" also takes slowHandshake to initialize; "child:barrier
// SOCKET" answers initialize once the test writes to its connection to
// SOCKET.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "child:minimal" || os.Args[1] == "child:slow" || os.Args[1] == "child:barrier") {
		raw, err := os.ReadFile(protocol.ManifestFile)
		mode := os.Args[1]
		if err == nil {
			err = sdk.Serve(&sdk.Extension{Manifest: raw,
				Initialize: func(context.Context, protocol.InitializeParams) error {
					switch mode {
					case "child:slow":
						// A handshake that waits on something outside the
						// process (an interpreter loading, a remote check).
						time.Sleep(slowHandshake)
					case "child:barrier":
						// Answer only once the test releases every package:
						// it does so when all of them are in initialize.
						c, err := net.Dial("unix", os.Args[2])
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
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The tests that run bundled packages (notes, runner) share one build of
// open-conduit, which serves them (extension-run).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func openConduitBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "oc-bin"); binErr == nil {
			binPath, binErr = testbin.Build(binDir)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	testbin.StatInputs(tb, "../..")
	return binPath
}
