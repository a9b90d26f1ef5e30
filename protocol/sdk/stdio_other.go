//go:build !unix

package sdk

import "os"

// pollable returns f: only Unix stdio is moved onto the poller.
func pollable(f *os.File) *os.File { return f }
