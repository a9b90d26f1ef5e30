package protocol

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The rules a package's files keep, beyond its manifest's text. Validate
// cannot see them: a relative path that stays inside the directory as
// text may still leave it through a symbolic link.
const (
	RuleCommandSymlink   = "command.symlink"
	RulePlaybooksSymlink = "playbooks.symlink"
)

// maxLinks bounds the symbolic links followed resolving one path, as the
// kernel's ELOOP does.
const maxLinks = 255

// CheckPackage checks the files the manifest m names in its package
// directory dir: the command's program and each playbook directory (and
// every link inside one), with every symbolic link on the way resolved,
// must stay inside dir. A path that does not exist yet passes: only a link
// can leave the directory, and a dangling link is followed as far as its
// text goes. It returns nil, the refusals joined (each a *ManifestError
// with its rule and field), or, when dir itself cannot be resolved, that
// error, which is no refusal (ManifestErrors finds none in it).
// LoadManifest runs it; the host runs it again before each start, since
// links can change after discovery.
func CheckPackage(dir string, m *Manifest) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolving the package directory: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return err
	}
	var errs []error
	if len(m.Command) > 0 && !m.RunsOnHost() && insideDir(m.Command[0]) {
		if problem := escapes(root, m.Command[0]); problem != "" {
			errs = append(errs, &ManifestError{Rule: RuleCommandSymlink, Path: "command[0]",
				Message: fmt.Sprintf("program %q %s", m.Command[0], problem)})
		}
	}
	for i, pb := range m.Provides.Playbooks {
		if !insideDir(pb) {
			continue // Validate refuses it as playbooks.inside
		}
		problem := escapes(root, pb)
		if problem == "" {
			problem = linkOut(root, pb)
		}
		if problem != "" {
			errs = append(errs, &ManifestError{Rule: RulePlaybooksSymlink, Path: fmt.Sprintf("provides.playbooks[%d]", i),
				Message: fmt.Sprintf("playbook directory %q %s", pb, problem)})
		}
	}
	return errors.Join(errs...)
}

// escapes says how the slash-separated relative path rel leaves root once
// its links are resolved, or "" when it stays inside.
func escapes(root, rel string) string {
	resolved, err := resolveIn(root, rel)
	if err != nil {
		return "cannot be resolved: " + err.Error()
	}
	if !within(root, resolved) {
		return "is a symbolic link (or goes through one) that leaves the package directory"
	}
	return ""
}

// linkOut walks the playbook directory rel under root and says which link
// inside it leaves root, or "" when none does.
func linkOut(root, rel string) string {
	start, err := resolveIn(root, rel)
	if err != nil {
		return "cannot be resolved: " + err.Error()
	}
	var problem string
	walkErr := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == start {
				return filepath.SkipDir // no playbook directory yet
			}
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		inner, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if p := escapes(root, filepath.ToSlash(inner)); p != "" {
			entry, _ := filepath.Rel(start, path)
			problem = fmt.Sprintf("holds %s, which %s", filepath.ToSlash(entry), p)
			return filepath.SkipAll
		}
		return nil
	})
	if walkErr != nil && problem == "" {
		return "cannot be read: " + walkErr.Error()
	}
	return problem
}

// resolveIn resolves the relative path rel against the directory root (an
// absolute path with no links), component by component, following every
// symbolic link, including a dangling one, as the kernel would. Once a
// component does not exist, the rest is joined as text.
func resolveIn(root, rel string) (string, error) {
	cur := root
	todo := strings.Split(filepath.ToSlash(rel), "/")
	links := 0
	missing := false
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur has no links, so this is the real parent
			continue
		}
		next := filepath.Join(cur, c)
		if missing {
			cur = next
			continue
		}
		info, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = true
			cur = next
			continue
		case err != nil:
			return "", err
		case info.Mode()&fs.ModeSymlink == 0:
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = string(filepath.Separator)
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return cur, nil
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}
