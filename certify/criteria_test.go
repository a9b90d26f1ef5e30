package certify_test

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

var criterionID = regexp.MustCompile(`^[a-z]+(/[a-z][a-z0-9-]*)+$`)

func TestRegistry(t *testing.T) {
	cs := certify.Criteria()
	require.NotEmpty(t, cs)
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
		assert.Regexp(t, criterionID, c.ID, "IDs are stable and hierarchical")
		assert.NotEmpty(t, c.Title, c.ID)
		assert.NotEmpty(t, c.Checks, c.ID)
		assert.NotEmpty(t, c.Section, c.ID)
		assert.True(t, (c.Run == nil) != (c.Check == nil), "%s has exactly one of Run and Check", c.ID)
		assert.NotContains(t, c.Checks, "\n", c.ID)
		got, ok := certify.Lookup(c.ID)
		assert.True(t, ok, c.ID)
		assert.Equal(t, c.ID, got.ID)
	}
	assert.True(t, slices.IsSorted(ids), "the registry is sorted by ID: %v", ids)
	assert.Len(t, slices.Compact(slices.Clone(ids)), len(ids), "IDs are unique")
	_, ok := certify.Lookup("kv/nope")
	assert.False(t, ok)

	// Criteria returns a copy: a caller cannot edit the registry.
	cs[0].ID = "edited/by-caller"
	assert.NotEqual(t, "edited/by-caller", certify.Criteria()[0].ID)
}

// The list of rules, each enforced by a criterion.
func TestRegistryCoversTheRules(t *testing.T) {
	for _, id := range []string{
		"manifest/valid", "lifecycle/handshake", "lifecycle/version-mismatch", "lifecycle/manifest-match",
		"lifecycle/stdout-hygiene", "lifecycle/shutdown", "lifecycle/stdin-eof", "lifecycle/crash-restart",
		"kv/scoping", "kv/atomicity", "emissions/atomic", "emissions/idempotent", "routes/pure",
		"routes/display", "routes/samples", "operations/idempotent", "schemas/current-version",
		"executor/lifecycle", "executor/controls", "transactions/deadline", "cancellation/honoured",
		// Criteria version 2.
		"wire/method-not-found", "wire/initialize-first", "wire/malformed-closes", "lifecycle/sigterm",
		"checks/shape", "tasks/interval", "validate/answers", "permissions/declared", "ingress/stable-scan", "schemas/readable", "wait/progress",
	} {
		_, ok := certify.Lookup(id)
		assert.True(t, ok, id)
	}
	assert.Equal(t, 2, certify.CriteriaVersion)
}

// Each criterion but manifest/valid has its own conformance check in its
// registry entry: no two criteria run the same check, so one cannot stand
// in for another.
func TestEveryCriterionHasItsOwnCheck(t *testing.T) {
	seen := map[uintptr]string{}
	for _, c := range certify.Criteria() {
		if c.ID == "manifest/valid" {
			assert.NotNil(t, c.Run, "the runner decides manifest/valid itself")
			assert.Nil(t, c.Check)
			continue
		}
		require.NotNil(t, c.Check, "%s has no check", c.ID)
		assert.Nil(t, c.Run, "%s has a Run beside its Check", c.ID)
		pc := reflect.ValueOf(c.Check).Pointer()
		if prev, dup := seen[pc]; dup {
			t.Errorf("%s and %s run the same check", prev, c.ID)
		}
		seen[pc] = c.ID
	}
}

// A criterion with no check, or whose launcher gives no conformance
// driver, ends as harness_error (ErrNotWired), never as pass.
func TestUnwiredCheckIsAHarnessError(t *testing.T) {
	p := &fakePackage{}
	unwired := certify.Criterion{ID: "a/unwired", Title: "unwired", Checks: "nothing", Section: "Fakes"}
	driven := certify.Criterion{ID: "b/driven", Title: "driven", Checks: "through a driver", Section: "Fakes",
		Check: func(context.Context, conformance.PackageDriver) error { return nil }}
	out, err := run(t, certify.Config{Criteria: []certify.Criterion{unwired, driven}, Launch: p.launch}, map[string]certify.Status{
		"a/unwired": certify.StatusHarnessError, "b/driven": certify.StatusHarnessError,
	})
	require.NoError(t, err)
	assert.Contains(t, result(t, out.report, "a/unwired").Detail, "criterion a/unwired has no check wired into certify")
	assert.Contains(t, result(t, out.report, "b/driven").Detail, "gives no conformance driver")
	assert.Equal(t, certify.ExitHarness, out.report.ExitCode())
}

func TestApplicability(t *testing.T) {
	full, minimal := loadManifest(t, fullDir), loadManifest(t, minimalDir)
	for _, c := range certify.Criteria() {
		if c.Applies == nil {
			continue
		}
		ok, reason := c.Applies(full)
		assert.True(t, ok, "%s applies to a package that declares everything: %s", c.ID, reason)
		ok, reason = c.Applies(minimal)
		assert.False(t, ok, "%s applies to a package that declares nothing", c.ID)
		assert.True(t, strings.HasPrefix(reason, "the manifest declares no"), "%s: %q", c.ID, reason)
	}

	// Criteria that every package must meet.
	for _, id := range []string{"manifest/valid", "lifecycle/handshake", "lifecycle/stdin-eof", "kv/scoping"} {
		c, _ := certify.Lookup(id)
		assert.Nil(t, c.Applies, id)
	}

	// The finer rules: the kind of operation, a declared display or samples,
	// a declared control.
	cases := []struct {
		id     string
		edit   func(*protocol.Manifest)
		ok     bool
		reason string
	}{
		{"operations/idempotent", func(m *protocol.Manifest) {
			m.Provides.Operations = []protocol.OperationDecl{{Name: "x.wait", Kind: protocol.OperationKindWait}}
		}, false, "the manifest declares no handler operation"},
		{"kv/atomicity", func(m *protocol.Manifest) {
			m.Provides.Operations = []protocol.OperationDecl{{Name: "x.wait", Kind: protocol.OperationKindWait}}
		}, false, "the manifest declares no handler operation"},
		{"routes/display", func(m *protocol.Manifest) {
			m.Provides.Routes = []protocol.RouteDecl{{Handler: "x"}}
		}, false, "no route handler declares a display"},
		{"routes/samples", func(m *protocol.Manifest) {
			m.Provides.Routes = []protocol.RouteDecl{{Handler: "x", Display: true}}
		}, false, "no route handler declares samples"},
		{"executor/controls", func(m *protocol.Manifest) {
			m.Provides.Executors = []protocol.ExecutorDecl{{Name: "x"}}
		}, false, "no executor declares a control"},
		{"executor/controls", func(m *protocol.Manifest) {
			m.Provides.Executors = []protocol.ExecutorDecl{{Name: "x", Labels: protocol.ExecutorLabels{Resume: true}}}
		}, true, ""},
		{"transactions/deadline", func(m *protocol.Manifest) {
			m.Provides.Operations = []protocol.OperationDecl{{Name: "x.wait", Kind: protocol.OperationKindWait, DependencyFilter: true}}
		}, true, ""},
		{"transactions/deadline", func(m *protocol.Manifest) {
			m.Provides.WorkKinds = []protocol.WorkKindDecl{{Name: "x"}}
		}, false, "the manifest declares no in-transaction method (no recurrence, work-kind trigger, dependency filter or emit commit)"},
		{"cancellation/honoured", func(m *protocol.Manifest) {
			m.Provides.Executors = []protocol.ExecutorDecl{{Name: "x"}}
		}, true, ""},
	}
	for _, tc := range cases {
		m := loadManifest(t, minimalDir)
		tc.edit(m)
		c, _ := certify.Lookup(tc.id)
		ok, reason := c.Applies(m)
		assert.Equal(t, tc.ok, ok, tc.id)
		assert.Equal(t, tc.reason, reason, tc.id)
	}
}
