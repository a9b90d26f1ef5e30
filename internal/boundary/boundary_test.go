package boundary_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/boundary"
)

// goList runs `go list -e -deps -test -json` over patterns from the module root.
func goList(t *testing.T, patterns ...string) []boundary.Package {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-test", "-json"}, patterns...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []boundary.Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p boundary.Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func TestImportRules(t *testing.T) {
	violations, ungoverned := boundary.Check(goList(t, "./..."), boundary.Rules)
	for _, v := range violations {
		t.Errorf("boundary: %s", v)
	}
	assert.Empty(t, ungoverned, "packages no rule in internal/boundary governs; give each a place in DESIGN.md's layout")
}

const m = boundary.Module + "/"

// TestCheckCatchesViolations is the negative control: graphs that break
// each kind of rule must be reported.
func TestCheckCatchesViolations(t *testing.T) {
	cases := []struct {
		name string
		pkg  boundary.Package
		dep  string
	}{
		{"core imports a third-party module", boundary.Package{ImportPath: m + "runtime", Deps: []string{"context", "modernc.org/sqlite"}}, "modernc.org/sqlite"},
		{"protocol imports the runtime", boundary.Package{ImportPath: m + "protocol", Deps: []string{m + "runtime"}}, m + "runtime"},
		{"host imports the SQLite store", boundary.Package{ImportPath: m + "host", Deps: []string{m + "protocol", m + "runtime/sqlite"}}, m + "runtime/sqlite"},
		{"suite imports the SQLite store", boundary.Package{ImportPath: m + "conformance", Deps: []string{m + "runtime/sqlite"}}, m + "runtime/sqlite"},
		{"extension imports another extension", boundary.Package{ImportPath: m + "extensions/notes", Deps: []string{m + "protocol/sdk", m + "extensions/runner"}}, m + "extensions/runner"},
		{"SDK imports the host", boundary.Package{ImportPath: m + "protocol/sdk", Deps: []string{m + "protocol", m + "host"}}, m + "host"},
		{"authors' harness imports the host", boundary.Package{ImportPath: m + "extensiontest", Deps: []string{m + "client", m + "protocol", m + "host"}}, m + "host"},
		{"authors' harness imports internal test helpers", boundary.Package{ImportPath: m + "extensiontest", Deps: []string{m + "client", m + "internal/daemontest"}}, m + "internal/daemontest"},
		{"an extension other than schedule imports robfig/cron", boundary.Package{ImportPath: m + "extensions/notes", Deps: []string{m + "protocol/sdk", "github.com/robfig/cron/v3"}}, "github.com/robfig/cron/v3"},
		{"the executor job model imports the SDK's test kit", boundary.Package{ImportPath: m + "protocol/sdk/jobs", Deps: []string{m + "protocol/sdk", m + "protocol/sdk/sdktest"}}, m + "protocol/sdk/sdktest"},
		{"the SDK imports robfig/cron", boundary.Package{ImportPath: m + "protocol/sdk", Deps: []string{m + "protocol", "github.com/robfig/cron/v3"}}, "github.com/robfig/cron/v3"},
		{"the core imports robfig/cron", boundary.Package{ImportPath: m + "runtime", Deps: []string{"github.com/robfig/cron/v3"}}, "github.com/robfig/cron/v3"},
		{"schedule imports another extension", boundary.Package{ImportPath: m + "extensions/schedule", Deps: []string{"github.com/robfig/cron/v3", m + "extensions/notes"}}, m + "extensions/notes"},
		{"test code pulls in an unknown module", boundary.Package{ImportPath: m + "protocol_test [" + m + "protocol.test]", ForTest: m + "protocol", Deps: []string{"example.com/evil"}}, "example.com/evil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			violations, _ := boundary.Check([]boundary.Package{c.pkg}, boundary.Rules)
			require.Len(t, violations, 1)
			assert.Equal(t, c.dep, violations[0].Dep)
		})
	}

	t.Run("schedule may import robfig/cron", func(t *testing.T) {
		violations, _ := boundary.Check([]boundary.Package{{ImportPath: m + "extensions/schedule",
			Deps: []string{m + "protocol/sdk", "github.com/robfig/cron/v3"}}}, boundary.Rules)
		assert.Empty(t, violations, "the one package the rule lets have it")

		// Real data: schedule really imports robfig/cron, so the rule every
		// other extension is under must fire on go list's own output.
		generic := []boundary.Rule{{Packages: []string{"extensions/schedule"}, Project: []string{"protocol/..."}, Why: "an extension"}}
		violations, _ = boundary.Check(goList(t, "./extensions/schedule"), generic)
		var deps []string
		for _, v := range violations {
			deps = append(deps, v.Dep)
		}
		assert.Contains(t, deps, "github.com/robfig/cron/v3")
	})

	t.Run("a package no rule governs", func(t *testing.T) {
		_, ungoverned := boundary.Check([]boundary.Package{{ImportPath: m + "newthing"}}, boundary.Rules)
		assert.Equal(t, []string{m + "newthing"}, ungoverned)
	})

	// Real data: the SQLite store really depends on modernc.org/sqlite, so a
	// rule that forbids it must fire on go list's own output.
	t.Run("real graph under a stricter rule", func(t *testing.T) {
		strict := []boundary.Rule{{Packages: []string{"runtime/sqlite"}, Project: []string{"runtime"}, Why: "strict"}}
		violations, _ := boundary.Check(goList(t, "./runtime/sqlite"), strict)
		var deps []string
		for _, v := range violations {
			deps = append(deps, v.Dep)
		}
		assert.Contains(t, strings.Join(deps, " "), "modernc.org/sqlite")
	})
}
