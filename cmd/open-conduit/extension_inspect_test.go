package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/packages"
)

// demoPackage writes a small package with a permission, a schema and a
// kv_version, which the offline commands read (it never runs).
func demoPackage(t *testing.T, dir, version string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	m := fmt.Sprintf(`{"name":"demo","title":"Demo","version":%q,"command":["./run"],"protocol":[1],"permissions":["telemetry.capture"],
 "provides":{"extensions":[{"type":"demo","families":[{"name":"demo.note","rederivable":true}]}],"schemas":[{"base":"demo.note","versions":[1,2]}]},"kv_version":3}`, version)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"), []byte(m), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run"), []byte("#!/bin/sh\n"), 0o755))
	return dir
}

// runIn runs the command in process and returns stdout, stderr and the
// exit status.
func runIn(args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// runBin runs the built binary, as an operator would, and returns
// stdout, stderr and the exit status.
func runBin(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	r := oc(t, daemonBinary(t), nil, args...)
	return r.stdout, r.stderr, r.code
}

func offlineFlags(t *testing.T) []string {
	t.Helper()
	return []string{"--config", t.TempDir(), "--state", t.TempDir()}
}

// TestInstallAsksForConsent: the operator sees what the package declares
// and is asked; no terminal and no --yes refuses, a "no" refuses, a "yes"
// installs.
func TestInstallAsksForConsent(t *testing.T) {
	src := demoPackage(t, filepath.Join(t.TempDir(), "demo"), "1.0.0")
	flags := offlineFlags(t)
	defer func(term func() bool) { isTerminal = term }(isTerminal)

	isTerminal = func() bool { return false }
	stdout, stderr, code := runIn(append([]string{"extension", "install", src}, flags...)...)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "pass --yes")
	assert.Contains(t, stdout, "telemetry.capture", "what it asks for is shown before the refusal")
	_, _, code = runIn(append([]string{"extension", "inspect", "demo"}, flags...)...)
	assert.Equal(t, exitFail, code, "nothing was installed")

	isTerminal = func() bool { return true }
	for _, c := range []struct {
		answer string
		code   int
	}{{"n\n", exitFail}, {"\n", exitFail}, {"yes\n", exitOK}} {
		consentInput = strings.NewReader(c.answer)
		_, stderr, code = runIn(append([]string{"extension", "install", src}, flags...)...)
		assert.Equal(t, c.code, code, "answer %q: %s", c.answer, stderr)
		assert.Contains(t, stderr, "Install demo 1.0.0 with these surfaces and permissions? [y/N]")
	}
	consentInput = os.Stdin
	_, _, code = runIn(append([]string{"extension", "inspect", "demo"}, flags...)...)
	assert.Equal(t, exitOK, code)
}

// TestInstallRefusesAnUnsafeArchive: an archive climbing out of its
// directory is refused with its code and leaves nothing.
func TestInstallRefusesAnUnsafeArchive(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "demo/../../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}))
	_, _ = tw.Write([]byte("x"))
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	dir := t.TempDir()
	archive := filepath.Join(dir, "demo.tar.gz")
	require.NoError(t, os.WriteFile(archive, buf.Bytes(), 0o644))
	flags := offlineFlags(t)
	stdout, stderr, code := runBin(t, append([]string{"extension", "install", "--yes", "--json", archive}, flags...)...)
	assert.Equal(t, exitFail, code)
	var res changeResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stderr)
	assert.Equal(t, packages.Code("unsafe_archive"), res.Code)
	// Unpacked under .staging/<id>.unpack, the entry would land in
	// .staging itself: nothing is there, nor anywhere in the tree.
	entries, err := os.ReadDir(filepath.Join(flags[1], "extensions", packages.StagingDir))
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is left staged")
	assert.NoFileExists(t, filepath.Join(flags[1], "extensions", "escaped"))
}

// TestListAndInspectOutput checks the text and JSON of extension list and
// inspect, offline, for an installed package with a previous release,
// from the built binary.
func TestListAndInspectOutput(t *testing.T) {
	srcRoot := t.TempDir()
	v1 := demoPackage(t, filepath.Join(srcRoot, "v1"), "1.0.0")
	v2 := demoPackage(t, filepath.Join(srcRoot, "v2"), "2.0.0")
	flags := offlineFlags(t)
	for _, c := range [][]string{{"install", v1}, {"update", v2}} {
		_, stderr, code := runBin(t, append([]string{"extension", c[0], "--yes", c[1]}, flags...)...)
		require.Equal(t, exitOK, code, stderr)
	}

	stdout, stderr, code := runBin(t, append([]string{"extension", "list"}, flags...)...)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^NAME\s+VERSION\s+ORIGIN\s+PROTOCOL\s+PERMISSIONS\s+STATE\s+RESTARTS\s+NOTE$`, stdout)
	assert.Regexp(t, `(?m)^demo\s+2\.0\.0\s+installed\s+1\s+telemetry\.capture\s+-\s+-\s+-$`, stdout, "offline: no state")

	stdout, stderr, code = runBin(t, append([]string{"extension", "list", "--json"}, flags...)...)
	require.Equal(t, exitOK, code, stderr)
	var entries []packages.Entry
	require.NoError(t, json.Unmarshal([]byte(stdout), &entries))
	require.Len(t, entries, 1)
	e := entries[0]
	assert.Equal(t, "demo", e.Name)
	assert.Equal(t, "2.0.0", e.Version)
	assert.Equal(t, packages.OriginInstalled, e.Origin)
	assert.Equal(t, []string{"telemetry.capture"}, e.Permissions)
	assert.Equal(t, 3, e.KVVersion)
	assert.False(t, e.Daemon)

	stdout, stderr, code = runBin(t, append([]string{"extension", "inspect", "demo"}, flags...)...)
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{
		"demo (Demo) 2.0.0",
		"  where:        installed " + filepath.Join(flags[1], "extensions", "demo"),
		"  kv_version:   3",
		"    config type:   demo",
		"    telemetry.capture  records named telemetry events for its configured scopes or the machine",
		"    demo.note          reads versions [1 2], writes v2",
		"  installed:    update from " + v2,
		"  rollback to:  1.0.0 (kv_version 3, sha256:",
	} {
		assert.Contains(t, stdout, want)
	}
	assert.Regexp(t, `(?m)^  digest:       sha256:[0-9a-f]{64}$`, stdout)

	stdout, stderr, code = runBin(t, append([]string{"extension", "inspect", "--json", "demo"}, flags...)...)
	require.Equal(t, exitOK, code, stderr)
	var in inspection
	require.NoError(t, json.Unmarshal([]byte(stdout), &in))
	assert.Equal(t, "2.0.0", in.Version)
	assert.Equal(t, packages.OriginInstalled, in.Origin)
	assert.Equal(t, []packages.Permission{{Name: "telemetry.capture", Allows: packages.PermissionAllows("telemetry.capture")}}, in.Permissions)
	assert.Equal(t, []packages.Schema{{Base: "demo.note", Versions: []int{1, 2}}}, in.Schemas)
	assert.Contains(t, in.Surfaces, "extensions.families")
	require.NotNil(t, in.Installed)
	assert.Equal(t, in.Digest, in.Installed.Digest)
	require.NotNil(t, in.Previous)
	assert.Equal(t, "1.0.0", in.Previous.Version)
	digest, err := packages.Digest(v2)
	require.NoError(t, err)
	assert.Equal(t, digest, in.Digest, "the installed copy has its source's digest")

	// A directory is inspected in place.
	stdout, stderr, code = runBin(t, append([]string{"extension", "inspect", "--json", v1}, flags...)...)
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), &in))
	assert.Equal(t, "1.0.0", in.Version)
	assert.Equal(t, "directory", in.Origin)
	assert.Equal(t, v1, in.Dir)

	_, stderr, code = runBin(t, append([]string{"extension", "inspect", "nosuch"}, flags...)...)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "neither an installed or bundled package nor a package directory")
}
