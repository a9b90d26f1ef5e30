package scenarios_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "open-conduit"), "../cmd/open-conduit")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building open-conduit: %v\n", err)
		return 1
	}
	linkPython(dir)
	binDir = dir
	return m.Run()
}

// linkPython puts the interpreter python3 resolves to in dir, as python3.
// Version-manager shims (pyenv) cost a few hundred milliseconds per start,
// and certification starts a Python package many times; the link runs the
// same interpreter without the shim. Without python3 it does nothing, and
// the scripts for Python packages skip.
func linkPython(dir string) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
		_ = os.Symlink(exe, filepath.Join(dir, "python3"))
	}
}

// TestScenarios runs every script in testdata against the built binary.
func TestScenarios(t *testing.T) {
	statInputs(t, "..")
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

// statInputs stats every source, manifest and script under root. The
// binary is built and the packages are read by other processes, which go
// test's result cache cannot see; a stat it can see makes a change to any
// of them run the scenarios again instead of reporting a stale pass.
func statInputs(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed while walking: nothing to track
		case err != nil:
			return err
		case d.IsDir() && path != root && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.Type().IsRegular():
			switch filepath.Ext(path) {
			case ".go", ".py", ".json", ".txtar", ".mod", ".sum":
				if _, err := os.Stat(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
