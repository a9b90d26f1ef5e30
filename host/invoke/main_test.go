package invoke_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pkgDir is the package the tests invoke: the child program of
// testdata/child and its manifest, in a directory whose name is a canary
// no diagnostic may repeat.
var pkgDir string

// The canaries: values the host must never echo in a diagnostic.
const (
	canaryPath   = "secretpath-5e1f"
	canaryParam  = "canary-param-91c2"
	canaryEnv    = "canary-env-0d77"
	canaryRemote = "secret-in-message"
)

const childManifest = `{
  "name": "invokechild",
  "version": "1.0.0",
  "command": ["child"],
  "protocol": [1],
  "provides": {}
}
`

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "invoke-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pkgDir = filepath.Join(root, "pkg-"+canaryPath)
	code := func() int {
		if err := os.Mkdir(pkgDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if out, err := exec.Command("go", "build", "-o", filepath.Join(pkgDir, "child"), "./testdata/child").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the test child: %v\n%s", err, out)
			return 1
		}
		if err := os.WriteFile(filepath.Join(pkgDir, "open-conduit-extension.json"), []byte(childManifest), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.RemoveAll(root)
	os.Exit(code)
}
