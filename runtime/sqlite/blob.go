package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/runtime"
)

// Blobs live under <dir>/artifacts: committed content at
// sha256/<first two hex digits>/<hex>, writes in progress under tmp/.
const (
	blobDir    = "artifacts"
	blobTmpDir = "tmp"
	digestAlgo = "sha256:"
)

// CreateBlob starts a blob (runtime.BlobStore). Its content streams to a
// temporary file; Commit fsyncs it and renames it to its content address.
func (s *Store) CreateBlob() (runtime.BlobWriter, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	tmp := filepath.Join(s.dir, blobDir, blobTmpDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create blob: %w", err)
	}
	f, err := os.CreateTemp(tmp, "blob-*")
	if err != nil {
		return nil, fmt.Errorf("sqlite: create blob: %w", err)
	}
	return &blobWriter{root: filepath.Join(s.dir, blobDir), f: f, h: sha256.New()}, nil
}

// OpenBlob opens committed content by digest (runtime.BlobStore).
func (s *Store) OpenBlob(digest string) (io.ReadCloser, error) {
	if err := validDigest(digest); err != nil {
		return nil, err
	}
	f, err := os.Open(blobPath(filepath.Join(s.dir, blobDir), digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s", runtime.ErrNotFound, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: open blob: %w", err)
	}
	return f, nil
}

func validDigest(d string) error {
	hexPart, ok := strings.CutPrefix(d, digestAlgo)
	if !ok || len(hexPart) != 2*sha256.Size {
		return fmt.Errorf("%w: digest %q is not sha256:<64 hex digits>", runtime.ErrInvalid, d)
	}
	if _, err := hex.DecodeString(hexPart); err != nil || strings.ToLower(hexPart) != hexPart {
		return fmt.Errorf("%w: digest %q is not sha256:<64 lowercase hex digits>", runtime.ErrInvalid, d)
	}
	return nil
}

func blobPath(root, digest string) string {
	h := strings.TrimPrefix(digest, digestAlgo)
	return filepath.Join(root, "sha256", h[:2], h)
}

type blobWriter struct {
	root string
	f    *os.File
	h    hash.Hash
	size int64
	done bool
}

func (w *blobWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("%w: blob writer is finished", runtime.ErrInvalid)
	}
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.size += int64(n)
	return n, err
}

func (w *blobWriter) Commit() (string, int64, error) {
	if w.done {
		return "", 0, fmt.Errorf("%w: blob writer is finished", runtime.ErrInvalid)
	}
	w.done = true
	tmp := w.f.Name()
	fail := func(err error) (string, int64, error) {
		w.f.Close()
		os.Remove(tmp)
		return "", 0, fmt.Errorf("sqlite: commit blob: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fail(err)
	}
	if err := w.f.Close(); err != nil {
		return fail(err)
	}
	digest := digestAlgo + hex.EncodeToString(w.h.Sum(nil))
	final := blobPath(w.root, digest)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	// Sync the directory that gained the file and its parent, which may
	// have gained the directory.
	for _, dir := range []string{filepath.Dir(final), filepath.Dir(filepath.Dir(final))} {
		if err := syncDir(dir); err != nil {
			return "", 0, fmt.Errorf("sqlite: commit blob: %w", err)
		}
	}
	return digest, w.size, nil
}

func (w *blobWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	return errors.Join(w.f.Close(), os.Remove(w.f.Name()))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
