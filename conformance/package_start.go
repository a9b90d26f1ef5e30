package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// StartBound is the host's start timeout: a package started for offline
// validation, like any start, has answered initialize within it. It is
// the criterion's own constant; tests do not shorten it.
const StartBound = 15 * time.Second

// CheckPackageStartBound starts a spare process cold, as offline
// validation does (config check, offline doctor: a fresh temporary state
// directory, removed afterwards), and requires initialize answered within
// StartBound of the launch. A package still silent at the bound is killed
// there, so the check never waits longer.
func CheckPackageStartBound(ctx context.Context, d PackageDriver) error {
	dir, err := os.MkdirTemp("", "open-conduit-offline-")
	if err != nil {
		return fmt.Errorf("making the offline start's state directory: %w", err)
	}
	defer os.RemoveAll(dir)
	params := d.InitializeParams()
	params.StateDir = dir
	launched := time.Now()
	return withSpare(ctx, d, func(p RawPackage) error {
		sctx, cancel := context.WithDeadline(ctx, launched.Add(StartBound))
		defer cancel()
		var res protocol.InitializeResult
		err := p.Call(sctx, "initialize", params, &res)
		took := time.Since(launched).Round(time.Millisecond)
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return fmt.Errorf("initialize was not answered within the %v start bound of its launch in a fresh state directory", StartBound)
		case err != nil:
			return fmt.Errorf("initialize, %v after launch in a fresh state directory: %w", took, err)
		case res.ProtocolVersion == 0:
			return fmt.Errorf("initialize answered without a protocol version, %v after launch", took)
		}
		return nil
	})
}
