package daemon

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/protocol"
)

// Doctor of the API's test backend: one check per status, so the route's
// answer is seen whole.
func (b *apiTestBackend) Doctor(_ context.Context, deep bool) client.DoctorReport {
	b.served("GET /v1/doctor")
	detail := "shallow"
	if deep {
		detail = "deep"
	}
	return doctorReport([]client.DoctorCheck{{Name: "store", Status: client.CheckOK, Detail: detail}})
}

func TestDoctorCheckName(t *testing.T) {
	for _, tc := range []struct{ pkg, check, want string }{
		{"notes", "notes", "notes"},
		{"notes", "notes_stores", "notes_stores"},
		{"notes", "notes-stores", "notes-stores"},
		{"notes", "stores", "notes_stores"},
		{"notes", "notesy", "notes_notesy"},
		{"gh", "github", "gh_github"},
	} {
		assert.Equal(t, tc.want, DoctorCheckName(tc.pkg, tc.check), "%s/%s", tc.pkg, tc.check)
	}
}

// TestDoctorReportFailsOnAnyFail: only a fail makes the report not OK;
// a warning does not.
func TestDoctorReportFailsOnAnyFail(t *testing.T) {
	assert.True(t, doctorReport([]client.DoctorCheck{{Status: client.CheckOK}, {Status: client.CheckWarn}, {Status: client.CheckInfo}}).OK)
	assert.False(t, doctorReport([]client.DoctorCheck{{Status: client.CheckOK}, {Status: client.CheckFail}}).OK)
}

func TestDoctorRouteTakesDeep(t *testing.T) {
	_, c := newAPITest(t)
	rep, err := c.Doctor(t.Context(), true)
	require.NoError(t, err)
	require.Len(t, rep.Checks, 1)
	assert.Equal(t, "deep", rep.Checks[0].Detail)
	rep, err = c.Doctor(t.Context(), false)
	require.NoError(t, err)
	assert.Equal(t, "shallow", rep.Checks[0].Detail)
}

// TestCheckViewIsThePackagesOwn: a check's view has the scopes that use
// the package, its own entries and the executor config of its own
// executors only, and the connections of its types those name with their
// config but never their secret references.
func TestCheckViewIsThePackagesOwn(t *testing.T) {
	mine := &protocol.Manifest{Name: "mine", Provides: protocol.Provides{
		Extensions:  []protocol.ExtensionDecl{{Type: "mine"}},
		Connections: []protocol.ConnectionDecl{{Type: "mine-api"}},
		Executors:   []protocol.ExecutorDecl{{Name: "mine-exec"}},
	}}
	other := &protocol.Manifest{Name: "other", Provides: protocol.Provides{
		Extensions: []protocol.ExtensionDecl{{Type: "other"}},
		Executors:  []protocol.ExecutorDecl{{Name: "other-exec"}},
	}}
	cat := newCatalogue([]*protocol.Manifest{mine, other})
	cfg := &Config{
		Connections: []ConnectionConfig{
			{Name: "api", Type: "mine-api", Config: map[string]any{"url": "https://x"}, SecretRefs: map[string]string{"token": "env:SECRET_TOKEN"}},
			{Name: "unused", Type: "mine-api"},
		},
		Scopes: []ScopeConfig{
			{ID: "a", Connections: []string{"api"},
				Entries: []EntryConfig{{ID: "m", Type: "mine", Connection: "api", Config: map[string]any{"k": 1}}, {ID: "o", Type: "other", Config: map[string]any{"theirs": true}}},
				Bindings: []BindingConfig{{Name: "b1", Executor: "mine-exec", ExecutorConfig: map[string]any{"bin": "/x"}},
					{Name: "b2", Executor: "other-exec", ExecutorConfig: map[string]any{"private": 1}}}},
			{ID: "b", Entries: []EntryConfig{{ID: "o", Type: "other"}}},
			{ID: "c", Disabled: true, Entries: []EntryConfig{{ID: "m", Type: "mine"}}},
		},
	}
	v := checkViewFor("/etc/oc", cfg, cat, mine)
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	s := string(raw)
	assert.NotContains(t, s, "SECRET_TOKEN")
	assert.NotContains(t, s, "env:")
	assert.NotContains(t, s, "theirs", "another package's entry is not shown")
	assert.NotContains(t, s, "private", "another package's executor config is not shown")
	require.Len(t, v.Scopes, 1, "only scope a uses mine (b does not; c is disabled)")
	assert.Equal(t, "a", v.Scopes[0].ID)
	require.Len(t, v.Scopes[0].Entries, 1)
	assert.Equal(t, "m", v.Scopes[0].Entries[0].ID)
	assert.JSONEq(t, `{"bin":"/x"}`, string(v.Scopes[0].Bindings[0].ExecutorConfig))
	assert.Empty(t, v.Scopes[0].Bindings[1].ExecutorConfig)
	require.Len(t, v.Connections, 1, "only the connection an entry names")
	assert.Equal(t, "api", v.Connections[0].Name)
	assert.JSONEq(t, `{"url":"https://x"}`, string(v.Connections[0].Config))
	assert.Equal(t, "/etc/oc", v.Dir)
}
