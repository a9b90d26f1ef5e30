//go:build !unix

package sdk

import "os"

// stdoutToStderr returns the standard error.
func stdoutToStderr() *os.File { return os.Stderr }
