package extensiontest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module is the module the daemon is built from.
const Module = "github.com/open-conduit/open-conduit"

// BinEnv names a prebuilt open-conduit binary to run instead of building
// one.
const BinEnv = "OPEN_CONDUIT_BIN"

// BuildLog is the file in the cache directory where every build of the
// daemon appends a line starting "built", and every test binary that
// waited for another's build one starting "waited", so how often it was
// built, and whether builds overlapped, can be checked.
const BuildLog = "builds.log"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary is the open-conduit binary the harness runs: $OPEN_CONDUIT_BIN
// when set, else cmd/open-conduit built from the module version the
// current module pins (see the package doc), once per test binary and
// cached across test binaries.
func Binary() (string, error) {
	binOnce.Do(func() { binPath, binErr = findBinary() })
	return binPath, binErr
}

func findBinary() (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		info, err := os.Stat(bin)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s=%s: %v; point it at a built open-conduit binary or unset it to build one", BinEnv, bin, err)
		case info.IsDir() || info.Mode().Perm()&0o111 == 0:
			return "", fmt.Errorf("%s=%s is not an executable file; point it at a built open-conduit binary or unset it to build one", BinEnv, bin)
		}
		return filepath.Abs(bin)
	}
	mod, err := pinnedModule()
	if err != nil {
		return "", fmt.Errorf("%v\nfix: run the test inside a module that requires %s (go get %s), or set %s to a built binary",
			err, Module, Module, BinEnv)
	}
	return buildCached(mod)
}

// moduleInfo is the part of `go list -m -json` the harness reads.
type moduleInfo struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *moduleInfo
}

// pinnedModule is the open-conduit module the current module builds
// with: its version, or the directory a replace points it at.
func pinnedModule() (moduleInfo, error) {
	cmd := exec.Command("go", "list", "-m", "-json", Module)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return moduleInfo{}, fmt.Errorf("go list -m %s: %v: %s", Module, err, strings.TrimSpace(stderr.String()))
	}
	var m moduleInfo
	if err := json.Unmarshal(out, &m); err != nil {
		return moduleInfo{}, fmt.Errorf("go list -m %s: %v", Module, err)
	}
	if m.Replace != nil {
		if m.Replace.Dir == "" {
			return moduleInfo{}, fmt.Errorf("go list -m %s: the replacement %s %s is not downloaded (go mod download)", Module, m.Replace.Path, m.Replace.Version)
		}
		m.Dir, m.Version = m.Replace.Dir, m.Replace.Version
	}
	if m.Dir == "" {
		return moduleInfo{}, fmt.Errorf("go list -m %s: version %s is not in the module cache (go mod download %s)", Module, m.Version, Module)
	}
	return m, nil
}

// cacheKey names a build: the module's version, or for a directory (a
// replace, or this repository itself) its path and a digest of its
// sources, so an edited checkout builds anew; and the toolchain.
func cacheKey(m moduleInfo) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", runtime.Version(), Module, runtime.GOOS, runtime.GOARCH)
	if m.Version != "" && !m.Main {
		fmt.Fprintf(h, "version %s\n", m.Version)
	} else {
		dir, err := filepath.Abs(m.Dir)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "dir %s\n", dir)
		if err := digestSources(h, dir); err != nil {
			return "", fmt.Errorf("reading the sources under %s: %v", dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// digestSources writes the path and content of every file a build of the
// module can read: Go files other than tests, go.mod and go.sum, and the
// embedded manifests. Test data, hidden directories and nested modules are
// not part of the build.
func digestSources(w io.Writer, root string) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"), name == "go.mod", name == "go.sum", strings.HasSuffix(name, ".json"):
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(w, "%s %x\n", strings.TrimPrefix(f, root), sum)
	}
	return nil
}

// cacheRoot is where built daemons are kept: os.UserCacheDir()/open-conduit/extensiontest.
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory (%v); set %s to a built binary", err, BinEnv)
	}
	return filepath.Join(base, "open-conduit", "extensiontest"), nil
}

// buildCached returns the cached build of m, building it first when it is
// missing. A file lock makes test binaries that start at once (several
// packages under go test ./...) build it once: the first builds, the
// others wait and find it.
func buildCached(m moduleInfo) (string, error) {
	key, err := cacheKey(m)
	if err != nil {
		return "", err
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	bin := filepath.Join(dir, "open-conduit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the daemon cache: %v; set %s to a built binary", err, BinEnv)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	waited := false
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		waited = true // another test binary holds it: it is building
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			return "", fmt.Errorf("locking the daemon cache: %v", err)
		}
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if info, err := os.Stat(bin); err == nil && info.Mode().IsRegular() {
		if waited {
			logBuild(root, "waited pid=%d key=%s: found the build another made", os.Getpid(), key)
		}
		return bin, nil
	}
	tmp := bin + ".tmp"
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", tmp, "./cmd/open-conduit")
	cmd.Dir = m.Dir
	// The module builds as itself, with its own go.sum: the daemon's
	// dependencies need not be in the author's.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build ./cmd/open-conduit in %s: %v\n%s\nfix: make the module build (go mod download), or set %s to a built open-conduit binary",
			m.Dir, err, out, BinEnv)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	logBuild(root, "built pid=%d key=%s module=%s@%s dir=%s took=%s", os.Getpid(), key, Module, m.Version, m.Dir,
		time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// logBuild appends one line to the cache's build log; the log is a record
// for people and tests, so failing to write it fails nothing.
func logBuild(root, format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(root, BuildLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", fmt.Sprintf(format, args...), time.Now().UTC().Format(time.RFC3339Nano))
}
