package daemon

import (
	"os"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/testbin"
)

// TestMain removes the builds the tests shared.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{binDir, minimalDir, faultBinDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
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
