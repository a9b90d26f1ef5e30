package extensiontest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeModule writes a small module with a cmd/open-conduit that prints
// word, standing in for the open-conduit module.
func fakeModule(t *testing.T, word string) moduleInfo {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "cmd", "open-conduit"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/fake\n\ngo 1.26.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cmd", "open-conduit", "main.go"),
		[]byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+word+"\") }\n"), 0o644))
	return moduleInfo{Path: Module, Dir: dir, Main: true}
}

func buildLines(t *testing.T, kind string) []string {
	t.Helper()
	root, err := cacheRoot()
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(root, BuildLog))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), kind+" ") {
			out = append(out, sc.Text())
		}
	}
	return out
}

// TestBuildCachedOnceUnderContention: builders that start at once (each
// with its own lock file descriptor, as separate test binaries have)
// build once; the others wait and run the same binary. A changed source
// builds anew.
func TestBuildCachedOnceUnderContention(t *testing.T) {
	// go's build cache stays where it is (it defaults to one under
	// XDG_CACHE_HOME): only the harness's cache is new.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	require.NoError(t, err)
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	m := fakeModule(t, "one")

	const builders = 4
	bins := make([]string, builders)
	errs := make([]error, builders)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range builders {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			bins[i], errs[i] = buildCached(m)
		}()
	}
	start.Done()
	done.Wait()
	for i := range builders {
		require.NoError(t, errs[i])
		assert.Equal(t, bins[0], bins[i])
	}
	assert.Len(t, buildLines(t, "built"), 1, "one build for every builder")
	assert.Len(t, buildLines(t, "waited"), builders-1, "the others waited for it")
	out, err := exec.Command(bins[0]).Output()
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(out))

	// The same module again: the cache answers, nothing is built.
	again, err := buildCached(m)
	require.NoError(t, err)
	assert.Equal(t, bins[0], again)
	assert.Len(t, buildLines(t, "built"), 1)

	// An edited source is another build.
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "cmd", "open-conduit", "main.go"),
		[]byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"two\") }\n"), 0o644))
	edited, err := buildCached(m)
	require.NoError(t, err)
	assert.NotEqual(t, bins[0], edited)
	out, err = exec.Command(edited).Output()
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(out))
	assert.Len(t, buildLines(t, "built"), 2)
}

// TestCacheKey: a version is keyed by the version; a directory by its
// path and sources, test files and test data left out.
func TestCacheKey(t *testing.T) {
	v1, err := cacheKey(moduleInfo{Path: Module, Version: "v1.2.0", Dir: "/a"})
	require.NoError(t, err)
	v1b, err := cacheKey(moduleInfo{Path: Module, Version: "v1.2.0", Dir: "/b"})
	require.NoError(t, err)
	v2, err := cacheKey(moduleInfo{Path: Module, Version: "v1.3.0", Dir: "/a"})
	require.NoError(t, err)
	assert.Equal(t, v1, v1b, "a version is the same build wherever the module cache keeps it")
	assert.NotEqual(t, v1, v2)

	m := fakeModule(t, "x")
	k1, err := cacheKey(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "cmd", "open-conduit", "main_test.go"), []byte("package main\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(m.Dir, "testdata"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "testdata", "x.go"), []byte("package x\n"), 0o644))
	k2, err := cacheKey(m)
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "tests and test data are not part of the build")
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "cmd", "open-conduit", "more.go"), []byte("package main\n"), 0o644))
	k3, err := cacheKey(m)
	require.NoError(t, err)
	assert.NotEqual(t, k1, k3, "a new source file is another build")
	other := fakeModule(t, "x")
	k4, err := cacheKey(other)
	require.NoError(t, err)
	assert.NotEqual(t, k1, k4, "another replace directory is another build")
}
