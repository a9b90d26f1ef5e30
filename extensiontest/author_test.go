package extensiontest_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	et "github.com/open-conduit/open-conduit/extensiontest"
	"github.com/open-conduit/open-conduit/internal/testbin"
)

// TestAuthorsModule runs the author's module in testdata/author (its own
// go.mod, replacing the open-conduit module with this repository) as its
// author runs it: go test ./... under -parallel 4. Its two test packages
// start at once on an empty daemon cache, and the cache's build log must
// show one build: the file lock makes the second wait for the first.
func TestAuthorsModule(t *testing.T) {
	if os.Getenv(et.BinEnv) != "" {
		t.Fatalf("%s is set: this test proves the harness builds the daemon itself; unset it", et.BinEnv)
	}
	testbin.StatInputs(t, "..")
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	require.NoError(t, err)
	cache := t.TempDir()
	cmd := exec.Command("go", "test", "-count=1", "-p", "2", "-parallel", "4", "./...")
	cmd.Dir = filepath.Join("testdata", "author")
	// An empty user cache (so the daemon is built here) but go's own
	// build cache as it is (so only the link is new).
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "GOCACHE="+strings.TrimSpace(string(gocache)), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test ./... in the author's module:\n%s", out)
	for _, pkg := range []string{"example.com/greeter/greeter", "example.com/greeter/certification"} {
		assert.Contains(t, string(out), "ok  \t"+pkg, "%s ran and passed:\n%s", pkg, out)
	}

	log, err := os.Open(filepath.Join(cache, "open-conduit", "extensiontest", et.BuildLog))
	require.NoError(t, err, "the daemon was built into the user cache")
	defer log.Close()
	var lines, builds []string
	for sc := bufio.NewScanner(log); sc.Scan(); {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "built ") {
			builds = append(builds, sc.Text())
		}
	}
	assert.Len(t, builds, 1, "two test binaries build the daemon once:\n%s", strings.Join(lines, "\n"))
	// Whether the second binary waited on the first's lock depends on
	// timing; the log says which happened.
	t.Logf("daemon cache build log:\n%s", strings.Join(lines, "\n"))
}
