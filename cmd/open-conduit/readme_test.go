package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const readmePath = "../../README.md"

// certifyFlags are the flags `extension certify --help` lists.
func certifyFlags(t *testing.T) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run([]string{"help", "extension", "certify"}, &stdout, &stderr), stderr.String())
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(--?[a-z][a-z-]*)\b`).FindAllStringSubmatch(stdout.String(), -1) {
		flags = append(flags, "--"+strings.TrimLeft(m[1], "-"))
	}
	return flags
}

// readmeGaps lists what readme leaves out: each command of the table
// (as "`open-conduit NAME"), each certify flag and each bundled
// extension; and each repository path or link it names that is not in
// the repository under root.
func readmeGaps(readme, root string, flags []string) []string {
	var gaps []string
	for _, c := range commands {
		if !strings.Contains(readme, "`open-conduit "+c.name) {
			gaps = append(gaps, "command "+c.name)
		}
	}
	for _, f := range flags {
		if !strings.Contains(readme, "`"+f) {
			gaps = append(gaps, "certify flag "+f)
		}
	}
	for _, name := range bundledNames() {
		if !strings.Contains(readme, "`"+name+"`") {
			gaps = append(gaps, "bundled extension "+name)
		}
	}
	var paths []string
	for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		paths = append(paths, m[1])
	}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9_./-]*/[a-z0-9_./-]*)`").FindAllStringSubmatch(readme, -1) {
		top, _, _ := strings.Cut(m[1], "/")
		if info, err := os.Stat(filepath.Join(root, top)); err == nil && info.IsDir() {
			paths = append(paths, m[1])
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			gaps = append(gaps, "path "+p+" is not in the repository")
		}
	}
	return gaps
}

// TestReadmeListsEveryCommandAndFlag: the README names every command the
// binary has, every flag of certify and the bundled extensions, and
// points only at what the repository holds.
func TestReadmeListsEveryCommandAndFlag(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	flags := certifyFlags(t)
	require.Contains(t, flags, "--baseline", "the flags parsed from certify's usage")
	assert.Empty(t, readmeGaps(string(readme), "../..", flags))

	// The check catches a README without a command, a flag or with a
	// path that is not there.
	gaps := readmeGaps("`open-conduit version` `--json` [notes](docs/gone.md) `protocol/nothing.go`", "../..", []string{"--json", "--keep"})
	assert.Contains(t, gaps, "command extension-run")
	assert.Contains(t, gaps, "certify flag --keep")
	assert.NotContains(t, gaps, "command version")
	assert.Contains(t, gaps, "path docs/gone.md is not in the repository")
	assert.Contains(t, gaps, "path protocol/nothing.go is not in the repository")
}
