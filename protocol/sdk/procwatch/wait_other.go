//go:build unix && !linux

package procwatch

import "context"

// WaitExit waits for pid to exit; without pidfd it polls (pollExit).
func WaitExit(ctx context.Context, pid int) error { return pollExit(ctx, pid) }
