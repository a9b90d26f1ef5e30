package sqlite_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// The durability drill re-runs this binary as its child.
	if dir := os.Getenv(drillChildEnv); dir != "" {
		runDrillChild(dir)
		return
	}
	code := m.Run()
	removeBenchStores()
	os.Exit(code)
}
