// Package testbin builds the open-conduit binary for the tests that drive
// it as a CI job would (certification runs, txtar scenarios), and holds
// the few helpers those tests share.
package testbin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build builds cmd/open-conduit into dir and returns the binary's path.
// Bundled extensions (notes, runner) run on that binary, so tests that
// start them over the wire need it rather than the test binary.
func Build(dir string) (string, error) { return BuildTags(dir) }

// BuildTags is Build with build tags: BuildTags(dir, "faultinject")
// builds the binary with the daemon's kill points (host/daemon's
// killpoint_on.go), which a release build does not have.
func BuildTags(dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "open-conduit")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, "github.com/open-conduit/open-conduit/cmd/open-conduit")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s cmd/open-conduit: %v\n%s", strings.Join(tags, ","), err, out)
	}
	return bin, nil
}

// LinkPython puts the interpreter python3 resolves to in dir, as python3.
// Version-manager shims (pyenv) cost a few hundred milliseconds per start,
// and certification starts a Python package many times; with dir first on
// PATH the same interpreter runs without the shim. Without python3 it does
// nothing.
func LinkPython(dir string) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
		_ = os.Symlink(exe, filepath.Join(dir, "python3"))
	}
}

// StatInputs stats every source, manifest and script under root. The
// binary is built and the packages are read by other processes, which go
// test's result cache cannot see; a stat it can see makes a change to any
// of them run the test again instead of reporting a stale pass.
func StatInputs(tb testing.TB, root string) {
	tb.Helper()
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
		tb.Fatal(err)
	}
}

// NeedPython fails the test when python3 is not on PATH. The Python
// example and the weakened packages (the negative controls) are Python, so
// a machine without it must not pass by skipping them.
func NeedPython(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		tb.Fatalf("python3 is required (the Python example and the negative controls are Python packages): %v", err)
	}
}
