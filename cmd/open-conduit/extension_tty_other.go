//go:build !linux

package main

import "os"

// stdinIsTerminal reports whether stdin is a character device; off Linux
// that is as close as the standard library gets to asking for a terminal.
func stdinIsTerminal() bool {
	st, err := os.Stdin.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
