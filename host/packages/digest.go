package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Digest is "sha256:<hex>" over a package directory's tree: every entry
// in path order, each as its slash-separated path, its kind (directory,
// file, executable file, link) and, for a file, the SHA-256 of its bytes
// or, for a link, its target. The same package has the same digest
// whether it came from a directory or an archive, and wherever it lives.
func Digest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch mode := info.Mode(); {
		case mode.IsDir():
			fmt.Fprintf(h, "d %q\n", rel)
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "l %q %q\n", rel, target)
		case mode.IsRegular():
			sum, err := fileSum(p)
			if err != nil {
				return err
			}
			kind := "f"
			if mode&0o111 != 0 {
				kind = "x"
			}
			fmt.Fprintf(h, "%s %q %s\n", kind, rel, sum)
		default:
			return fmt.Errorf("%w: %s is a special file", ErrUnsafeArchive, rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
