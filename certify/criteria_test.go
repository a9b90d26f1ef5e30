package certify_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/certify"
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
		assert.NotNil(t, c.Run, c.ID)
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
	} {
		_, ok := certify.Lookup(id)
		assert.True(t, ok, id)
	}
	assert.Equal(t, 1, certify.CriteriaVersion)
}

// Each suite-backed criterion reaches its own Suites method: a recording
// Suites sees every criterion call exactly one method, and no two criteria
// share one.
func TestCriteriaCallTheirSuites(t *testing.T) {
	m, err := protocol.LoadManifest(fullDir)
	require.NoError(t, err)
	rec := &recordingSuites{}
	seen := map[string]string{}
	for _, c := range certify.Criteria() {
		if c.ID == "manifest/valid" {
			continue
		}
		rec.calls = nil
		err := c.Run(context.Background(), &certify.Target{Dir: fullDir, Manifest: m, Suites: rec})
		assert.NoError(t, err, c.ID)
		require.Len(t, rec.calls, 1, c.ID)
		if prev, dup := seen[rec.calls[0]]; dup {
			t.Errorf("%s and %s both run %s", prev, c.ID, rec.calls[0])
		}
		seen[rec.calls[0]] = c.ID
	}
	// Unwired, every one of them is a harness error, never a pass.
	for _, c := range certify.Criteria() {
		if c.ID == "manifest/valid" {
			continue
		}
		for _, s := range []certify.Suites{nil, certify.NotWired{}} {
			err := c.Run(context.Background(), &certify.Target{Manifest: m, Suites: s})
			assert.ErrorIs(t, err, certify.ErrNotWired, c.ID)
			assert.ErrorIs(t, err, certify.ErrHarness, c.ID)
		}
	}
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

// recordingSuites records which method each criterion calls.
type recordingSuites struct{ calls []string }

func (r *recordingSuites) rec(name string) error { r.calls = append(r.calls, name); return nil }

func (r *recordingSuites) Handshake(context.Context, *certify.Target) error {
	return r.rec("Handshake")
}
func (r *recordingSuites) VersionMismatch(context.Context, *certify.Target) error {
	return r.rec("VersionMismatch")
}
func (r *recordingSuites) ManifestMatch(context.Context, *certify.Target) error {
	return r.rec("ManifestMatch")
}
func (r *recordingSuites) StdoutHygiene(context.Context, *certify.Target) error {
	return r.rec("StdoutHygiene")
}
func (r *recordingSuites) Shutdown(context.Context, *certify.Target) error { return r.rec("Shutdown") }
func (r *recordingSuites) StdinEOF(context.Context, *certify.Target) error { return r.rec("StdinEOF") }
func (r *recordingSuites) CrashRestart(context.Context, *certify.Target) error {
	return r.rec("CrashRestart")
}
func (r *recordingSuites) KVScoping(context.Context, *certify.Target) error {
	return r.rec("KVScoping")
}
func (r *recordingSuites) KVAtomicity(context.Context, *certify.Target) error {
	return r.rec("KVAtomicity")
}
func (r *recordingSuites) EmissionsAtomic(context.Context, *certify.Target) error {
	return r.rec("EmissionsAtomic")
}
func (r *recordingSuites) EmissionsIdempotent(context.Context, *certify.Target) error {
	return r.rec("EmissionsIdempotent")
}
func (r *recordingSuites) RoutesPure(context.Context, *certify.Target) error {
	return r.rec("RoutesPure")
}
func (r *recordingSuites) RoutesDisplay(context.Context, *certify.Target) error {
	return r.rec("RoutesDisplay")
}
func (r *recordingSuites) RouteSamples(context.Context, *certify.Target) error {
	return r.rec("RouteSamples")
}
func (r *recordingSuites) OperationsIdempotent(context.Context, *certify.Target) error {
	return r.rec("OperationsIdempotent")
}
func (r *recordingSuites) SchemasCurrent(context.Context, *certify.Target) error {
	return r.rec("SchemasCurrent")
}
func (r *recordingSuites) ExecutorLifecycle(context.Context, *certify.Target) error {
	return r.rec("ExecutorLifecycle")
}
func (r *recordingSuites) ExecutorControls(context.Context, *certify.Target) error {
	return r.rec("ExecutorControls")
}
func (r *recordingSuites) InTransactionDeadline(context.Context, *certify.Target) error {
	return r.rec("InTransactionDeadline")
}
func (r *recordingSuites) Cancellation(context.Context, *certify.Target) error {
	return r.rec("Cancellation")
}
