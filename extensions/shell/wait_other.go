//go:build unix && !linux

package shell

import "context"

// waitExit waits for pid to exit; without pidfd it polls (pollExit).
func waitExit(ctx context.Context, pid int) error { return pollExit(ctx, pid) }
