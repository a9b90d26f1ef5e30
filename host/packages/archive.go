package packages

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Bounds of what a package may hold, from an archive or a directory.
// Variables so a test can shrink them.
var (
	// MaxPackageBytes bounds the bytes of all a package's files together.
	MaxPackageBytes int64 = 512 << 20
	// MaxPackageEntries bounds how many files, directories and links a
	// package holds.
	MaxPackageEntries = 10000
	// MaxPathBytes bounds one entry's path inside the package.
	MaxPathBytes = 1024
)

// cleanEntry is an archive or tree entry's slash-separated path made
// relative and checked: no absolute path, no "..", no NUL, not too long.
// It returns "" for the root itself.
func cleanEntry(name string) (string, error) {
	if len(name) > MaxPathBytes {
		return "", fmt.Errorf("%w: an entry's path is %d bytes, over %d", ErrUnsafeArchive, len(name), MaxPathBytes)
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", fmt.Errorf("%w: entry %q has a NUL or a backslash in its path", ErrUnsafeArchive, clip(name))
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: entry %q has an absolute path", ErrUnsafeArchive, clip(name))
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: entry %q climbs out with \"..\"", ErrUnsafeArchive, clip(name))
		}
	}
	p := path.Clean(name)
	if p == "." {
		return "", nil
	}
	return p, nil
}

// linkInside reports whether a symbolic link at rel (slash-separated, in
// the package) with target stays inside the package: a relative target
// whose ".." steps all come first and do not climb above the root. No
// entry is written under a link (writer.admit), so the link's own
// directory is real and the leading steps climb real directories; the
// names after them only descend, through links that each stay inside by
// the same rule. (A ".." after a name could climb out of a link's target,
// as "b/../x" does when b links to ".".)
func linkInside(rel, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) || strings.Contains(target, "\\") {
		return false
	}
	named := false
	for _, part := range strings.Split(target, "/") {
		switch {
		case part == "..":
			if named {
				return false
			}
		case part != "" && part != ".":
			named = true
		}
	}
	joined := path.Join(path.Dir(rel), target)
	return joined != ".." && !strings.HasPrefix(joined, "../")
}

// writer writes a package's entries under root, refusing what would leave
// it and keeping the bounds.
type writer struct {
	root    string
	bytes   int64
	entries int
	// links are the symbolic links written, so no later entry is written
	// through one.
	links map[string]bool
	seen  map[string]bool
}

func newWriter(root string) *writer {
	return &writer{root: root, links: map[string]bool{}, seen: map[string]bool{}}
}

// admit checks rel before an entry is written there: counted, not seen
// before, and no parent of it a link.
func (w *writer) admit(rel string) error {
	w.entries++
	if w.entries > MaxPackageEntries {
		return fmt.Errorf("%w: over %d entries", ErrTooLarge, MaxPackageEntries)
	}
	if w.seen[rel] {
		return fmt.Errorf("%w: entry %q appears twice", ErrUnsafeArchive, clip(rel))
	}
	w.seen[rel] = true
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		if w.links[dir] {
			return fmt.Errorf("%w: entry %q is under the link %q", ErrUnsafeArchive, clip(rel), clip(dir))
		}
	}
	return nil
}

func (w *writer) dir(rel string) error {
	if rel == "" {
		return nil
	}
	if err := w.admit(rel); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(rel)), 0o755)
}

func (w *writer) file(rel string, mode fs.FileMode, r io.Reader) error {
	if rel == "" {
		return fmt.Errorf("%w: a file entry has no name", ErrUnsafeArchive)
	}
	if err := w.admit(rel); err != nil {
		return err
	}
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	left := MaxPackageBytes - w.bytes
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	w.bytes += n
	if err == nil && n > left {
		err = fmt.Errorf("%w: the files are over %d bytes", ErrTooLarge, MaxPackageBytes)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *writer) symlink(rel, target string) error {
	if rel == "" {
		return fmt.Errorf("%w: a link entry has no name", ErrUnsafeArchive)
	}
	if !linkInside(rel, target) {
		return fmt.Errorf("%w: link %q points out of the package (%q)", ErrUnsafeArchive, clip(rel), clip(target))
	}
	if err := w.admit(rel); err != nil {
		return err
	}
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	w.links[rel] = true
	return os.Symlink(target, dst)
}

// Unpack writes the gzip-compressed tar archive r under dest, which must
// be an empty directory. It refuses, with ErrUnsafeArchive, an absolute
// path, a path with "..", a link out of the package or an entry written
// through a link, a hard link, a device, a FIFO and any other special
// file, and a path given twice; and with ErrTooLarge an archive whose
// files are over MaxPackageBytes or that has over MaxPackageEntries
// entries. On a refusal dest holds part of the archive: the caller removes
// it.
func Unpack(r io.Reader, dest string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: not a gzip stream: %v", ErrUnsafeArchive, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	w := newWriter(dest)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the archive: %v", ErrUnsafeArchive, err)
		}
		rel, err := cleanEntry(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = w.dir(rel)
		case tar.TypeReg: // the reader reports a legacy TypeRegA as TypeReg or TypeDir
			if h.Size > MaxPackageBytes {
				return fmt.Errorf("%w: entry %q is %d bytes, over %d", ErrTooLarge, clip(rel), h.Size, MaxPackageBytes)
			}
			err = w.file(rel, fs.FileMode(h.Mode), tr)
		case tar.TypeSymlink:
			err = w.symlink(rel, h.Linkname)
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeLink:
			err = fmt.Errorf("%w: entry %q is a hard link", ErrUnsafeArchive, clip(rel))
		default:
			err = fmt.Errorf("%w: entry %q is a special file (type %q), not a file, directory or link", ErrUnsafeArchive, clip(rel), h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

// CopyTree copies the package directory src under dest, an empty
// directory, keeping the rules Unpack keeps: regular files, directories
// and links that stay inside only, within the bounds.
func CopyTree(src, dest string) error {
	w := newWriter(dest)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		relOS, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel, err := cleanEntry(filepath.ToSlash(relOS))
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return w.dir(rel)
		case mode.IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return w.file(rel, mode, f)
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return w.symlink(rel, target)
		default:
			return fmt.Errorf("%w: %s is a special file (%s), not a file, directory or link", ErrUnsafeArchive, clip(rel), mode.Type())
		}
	})
}

// clip bounds what of an untrusted name a message repeats.
func clip(s string) string {
	const max = 96
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
