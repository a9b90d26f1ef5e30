package scenarios_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/internal/testbin"
)

// binDir holds the open-conduit binary TestMain builds once for every
// scenario.
var binDir string

// TestMain builds the real binary: the scenarios drive it as a CI job
// would, and the bundled extensions (notes, runner) run on it, so it
// cannot be an in-process testscript command.
func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "open-conduit-scenarios-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if _, err := testbin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Without python3 the scripts for Python packages skip.
	testbin.LinkPython(dir)
	binDir = dir
	return m.Run()
}

// TestScenarios runs every script in testdata against the built binary.
func TestScenarios(t *testing.T) {
	testbin.StatInputs(t, "..")
	testbin.NeedPython(t) // the negative controls and pynotes are Python packages
	testscript.Run(t, testscript.Params{
		Dir:   "testdata",
		Cmds:  scriptCmds,
		Setup: setup,
	})
}

// setup puts the binary first on PATH and names the package directories
// the scripts certify.
func setup(env *testscript.Env) error {
	env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
	for name, rel := range map[string]string{
		"EXT":    "../testdata/extensions",
		"NOTES":  "../extensions/notes",
		"RUNNER": "../extensions/runner",
	} {
		abs, err := filepath.Abs(rel)
		if err != nil {
			return err
		}
		env.Setenv(name, abs)
	}
	return nil
}
