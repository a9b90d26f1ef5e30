package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/open-conduit/open-conduit/protocol"
)

// Package is one discovered extension package.
type Package struct {
	// Name is the manifest's name, which is also its directory's name.
	Name string
	// Dir is the package directory, where its command runs.
	Dir string
	// Manifest is the parsed, validated manifest.
	Manifest *protocol.Manifest
	// Bundled marks a package shipped beside the executable.
	Bundled bool
}

// Problem is a package directory that discovery reported and skipped.
type Problem struct {
	// Dir is the package directory.
	Dir string
	// Name is the directory's name, which an installed package must share
	// with its manifest.
	Name string
	// Bundled marks a directory beside the executable.
	Bundled bool
	// Err says why it was skipped.
	Err error
}

func (p Problem) Error() string { return fmt.Sprintf("extension %s (%s): %v", p.Name, p.Dir, p.Err) }

// ErrMisnamed is a manifest whose name differs from its directory's.
var ErrMisnamed = errors.New("the directory is not named after the manifest")

// Discover reads every <root>/<name>/open-conduit-extension.json, in name
// order. An invalid or misnamed manifest is reported as a Problem and
// skipped; a directory without a manifest is ignored; a missing root means
// no packages. Only an unreadable root is an error.
func Discover(root string) ([]Package, []Problem, error) {
	return discover(root, false)
}

func discover(root string, bundled bool) ([]Package, []Problem, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading extensions root: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var pkgs []Package
	var problems []Problem
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, protocol.ManifestFile)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		m, err := protocol.LoadManifest(dir)
		switch {
		case err != nil:
			problems = append(problems, Problem{Dir: dir, Name: e.Name(), Bundled: bundled, Err: err})
		case m.Name != e.Name():
			problems = append(problems, Problem{Dir: dir, Name: e.Name(), Bundled: bundled,
				Err: fmt.Errorf("%w: the manifest names %q", ErrMisnamed, m.Name)})
		default:
			pkgs = append(pkgs, Package{Name: m.Name, Dir: dir, Manifest: m, Bundled: bundled})
		}
	}
	return pkgs, problems, nil
}

// BundledRoot is the extensions directory beside the running executable,
// with links resolved, where packages shipped with the binary live.
func BundledRoot() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(exe), "extensions"), nil
}

// DiscoverAll discovers the installed packages under installed, then the
// bundled ones under bundled ("" for none). An installed directory replaces
// a bundled package of the same name even when the installed one is
// refused, so a release that needs a newer host is reported instead of
// silently swapped for the bundled one.
func DiscoverAll(installed, bundled string) ([]Package, []Problem, error) {
	pkgs, problems, err := discover(installed, false)
	if err != nil || bundled == "" {
		return pkgs, problems, err
	}
	taken := map[string]bool{}
	for _, p := range pkgs {
		taken[p.Name] = true
	}
	for _, p := range problems {
		taken[p.Name] = true
	}
	bpkgs, bproblems, err := discover(bundled, true)
	if err != nil {
		return pkgs, problems, err
	}
	for _, p := range bpkgs {
		if !taken[p.Name] {
			pkgs = append(pkgs, p)
		}
	}
	for _, p := range bproblems {
		if !taken[p.Name] {
			problems = append(problems, p)
		}
	}
	return pkgs, problems, nil
}
