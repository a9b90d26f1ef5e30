//go:build !linux

package jsonrpc_test

import "os"

// growPipe leaves the pipe's buffer as it is outside Linux.
func growPipe(*os.File) {}
