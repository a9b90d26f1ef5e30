package packages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entry is one archive entry a test writes.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func archive(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestUnpackRefusesWhatLeavesThePackage(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    error
		says    string
	}{
		{"absolute path", []entry{{name: "/etc/evil", body: "x"}}, ErrUnsafeArchive, "absolute"},
		{"dot dot", []entry{{name: "pkg/../../evil", body: "x"}}, ErrUnsafeArchive, `".."`},
		{"absolute link", []entry{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, ErrUnsafeArchive, "points out"},
		{"link climbing out", []entry{{name: "a/l", typ: tar.TypeSymlink, link: "../../x"}}, ErrUnsafeArchive, "points out"},
		{"link climbing after a name", []entry{{name: "b", typ: tar.TypeSymlink, link: "."}, {name: "a", typ: tar.TypeSymlink, link: "b/../x"}}, ErrUnsafeArchive, "points out"},
		{"file through a link", []entry{{name: "d", typ: tar.TypeSymlink, link: "sub"}, {name: "d/f", body: "x"}}, ErrUnsafeArchive, "under the link"},
		{"hard link", []entry{{name: "f", body: "x"}, {name: "h", typ: tar.TypeLink, link: "f"}}, ErrUnsafeArchive, "hard link"},
		{"device", []entry{{name: "dev", typ: tar.TypeChar}}, ErrUnsafeArchive, "special file"},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, ErrUnsafeArchive, "special file"},
		{"twice", []entry{{name: "f", body: "x"}, {name: "f", body: "y"}}, ErrUnsafeArchive, "twice"},
		{"oversize", []entry{{name: "big", body: strings.Repeat("x", 2048)}}, ErrTooLarge, "over"},
	}
	defer func(b int64) { MaxPackageBytes = b }(MaxPackageBytes)
	MaxPackageBytes = 1024
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dest := t.TempDir()
			err := Unpack(bytes.NewReader(archive(t, c.entries...)), dest)
			require.ErrorIs(t, err, c.want)
			assert.Contains(t, err.Error(), c.says)
			assertNothingOutside(t, dest)
		})
	}
}

func TestUnpackRefusesTooManyEntries(t *testing.T) {
	defer func(n int) { MaxPackageEntries = n }(MaxPackageEntries)
	MaxPackageEntries = 3
	var es []entry
	for _, n := range []string{"a", "b", "c", "d"} {
		es = append(es, entry{name: n, body: n})
	}
	require.ErrorIs(t, Unpack(bytes.NewReader(archive(t, es...)), t.TempDir()), ErrTooLarge)
}

func TestUnpackWritesAPackage(t *testing.T) {
	dest := t.TempDir()
	require.NoError(t, Unpack(bytes.NewReader(archive(t,
		entry{name: "pkg/", typ: tar.TypeDir},
		entry{name: "pkg/open-conduit-extension.json", body: "{}"},
		entry{name: "pkg/bin/run", body: "#!/bin/sh\n", mode: 0o755},
		entry{name: "pkg/run", typ: tar.TypeSymlink, link: "bin/run"},
		entry{name: "pkg/lib/tool", typ: tar.TypeSymlink, link: "../bin/run"},
	)), dest))
	st, err := os.Stat(filepath.Join(dest, "pkg/bin/run"))
	require.NoError(t, err)
	assert.NotZero(t, st.Mode()&0o100, "the executable bit is kept")
	target, err := os.Readlink(filepath.Join(dest, "pkg/run"))
	require.NoError(t, err)
	assert.Equal(t, "bin/run", target)
}

func TestUnpackRefusesWhatIsNotAnArchive(t *testing.T) {
	require.ErrorIs(t, Unpack(strings.NewReader("not gzip"), t.TempDir()), ErrUnsafeArchive)
}

// assertNothingOutside checks that unpacking under dest wrote nothing
// next to it: dest's parent holds dest only.
func assertNothingOutside(t *testing.T, dest string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dest))
	require.NoError(t, err)
	for _, e := range entries {
		assert.Equal(t, filepath.Base(dest), e.Name(), "written beside the destination")
	}
}

func TestCopyTreeRefusesALinkOut(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(src, "out")))
	require.ErrorIs(t, CopyTree(src, t.TempDir()), ErrUnsafeArchive)
}

func TestDigestIsTheSameFromADirectoryAndAnArchive(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "run"), []byte("#!"), 0o755))
	fromArchive := t.TempDir()
	require.NoError(t, Unpack(bytes.NewReader(archive(t, entry{name: "a", body: "x"}, entry{name: "run", body: "#!", mode: 0o755})), fromArchive))
	d1, err := Digest(src)
	require.NoError(t, err)
	d2, err := Digest(fromArchive)
	require.NoError(t, err)
	assert.Equal(t, d1, d2)
	// Negative control: the executable bit is part of the digest.
	require.NoError(t, os.Chmod(filepath.Join(src, "run"), 0o644))
	d3, err := Digest(src)
	require.NoError(t, err)
	assert.NotEqual(t, d1, d3)
}

// FuzzUnpack: whatever the archive, Unpack writes nothing outside its
// destination and no link there points out of it. The seed corpus is in
// testdata/fuzz/FuzzUnpack (valid packages and each refusal).
func FuzzUnpack(f *testing.F) {
	// Small bounds keep each input cheap; the bounds themselves are
	// tested above.
	defer func(b int64, n int) { MaxPackageBytes, MaxPackageEntries = b, n }(MaxPackageBytes, MaxPackageEntries)
	MaxPackageBytes, MaxPackageEntries = 1<<20, 256
	f.Add(archive(f, entry{name: "open-conduit-extension.json", body: "{}"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "dest")
		require.NoError(t, os.Mkdir(dest, 0o755))
		_ = Unpack(bytes.NewReader(data), dest)
		assertNothingOutside(t, dest)
		_ = filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.Mode()&os.ModeSymlink == 0 {
				return nil
			}
			target, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			outside := func(q string) bool {
				rel, err := filepath.Rel(dest, q)
				return err != nil || rel == ".." || strings.HasPrefix(rel, "../")
			}
			if filepath.IsAbs(target) || outside(filepath.Join(filepath.Dir(p), target)) {
				t.Fatalf("link %s points outside the package: %s", p, target)
			}
			if resolved, err := filepath.EvalSymlinks(p); err == nil && outside(resolved) {
				t.Fatalf("link %s resolves outside the package to %s", p, resolved)
			}
			return nil
		})
	})
}
