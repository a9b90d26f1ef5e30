package extensiontest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/open-conduit/open-conduit/protocol"
)

// install copies the package in src to <configDir>/extensions/<name>
// (replacing what was there) and returns its manifest. A Go main package
// is built into the copy as its manifest's command.
func install(configDir, src string) (*protocol.Manifest, error) {
	m, err := protocol.LoadManifest(src)
	if err != nil {
		return nil, fmt.Errorf("the package in %s: %w (open-conduit extension validate %s says more)", src, err, src)
	}
	dst := filepath.Join(configDir, "extensions", m.Name)
	if err := os.RemoveAll(dst); err != nil {
		return nil, err
	}
	if err := copyPackage(src, dst); err != nil {
		return nil, fmt.Errorf("copying %s: %w", src, err)
	}
	if m.RunsOnHost() {
		return m, nil // served by the daemon's own binary
	}
	isMain, err := goMainPackage(src)
	if err != nil || !isMain {
		return m, err
	}
	exe, err := buildPackage(src)
	if err != nil {
		return nil, err
	}
	target := filepath.Join(dst, filepath.FromSlash(m.Command[0]))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, err
	}
	if err := os.Link(exe, target); err != nil {
		if err := copyFile(exe, target, 0o755); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// copyPackage copies what a package needs at run time: every file but Go
// sources, module files and test data.
func copyPackage(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyFile(path, filepath.Join(dst, rel), info.Mode().Perm())
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// goMainPackage reports whether dir holds Go files of package main.
func goMainPackage(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.PackageClauseOnly)
		if err != nil {
			return false, err
		}
		return f.Name.Name == "main", nil
	}
	return false, nil
}

var (
	buildMu sync.Mutex
	builds  = map[string]string{} // package directory → its built binary
)

// buildPackage builds the Go main package in dir once per test binary,
// into a directory of the system's temporary directory named by dir's
// path: rebuilt by each test binary (go's build cache makes that a link),
// under a file lock so test binaries that build at once do not collide.
func buildPackage(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if exe, ok := builds[abs]; ok {
		return exe, nil
	}
	sum := sha256.Sum256([]byte(abs))
	out := filepath.Join(os.TempDir(), "oc-et-pkg-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(out, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	// A new build replaces the old by a rename: a daemon still running
	// the old one (or a case's hard link to it) keeps its file.
	exe := filepath.Join(out, "pkg")
	tmp := fmt.Sprintf("%s.tmp-%d", exe, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = abs
	msg, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build in %s: %v\n%s", dir, err, msg)
	}
	if err := os.Rename(tmp, exe); err != nil {
		return "", err
	}
	builds[abs] = exe
	return exe, nil
}
