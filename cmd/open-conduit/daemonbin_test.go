package main

import (
	"os"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/internal/testbin"
)

// The tests that start `serve` share one build of the binary per test
// package; TestMain removes it after the run (withBinaryCleanup).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// daemonBinary is the built open-conduit, built on first use.
func daemonBinary(tb testing.TB) string {
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

// withBinaryCleanup removes the shared binary once the tests have run.
func withBinaryCleanup(m testscript.TestingM) testscript.TestingM { return cleanupM{m} }

type cleanupM struct{ testscript.TestingM }

func (c cleanupM) Run() int {
	code := c.TestingM.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}
