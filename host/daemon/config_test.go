package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// testCatalogue declares what the config tests name: notes as in the
// repository, runner, and a package with a connection type and a toolset.
func testCatalogue(t testing.TB) *catalogue {
	t.Helper()
	var ms []*protocol.Manifest
	for _, dir := range []string{"../../extensions/notes", "../../extensions/runner"} {
		m, err := protocol.LoadManifest(dir)
		require.NoError(t, err)
		ms = append(ms, m)
	}
	gh, err := protocol.ParseManifest([]byte(`{"name": "gh", "version": "1", "command": ["gh"], "protocol": [1],
	  "provides": {"connections": [{"type": "gh"}],
	    "operations": [{"name": "gh.comment", "kind": "handler", "summary": "Comment."}],
	    "toolsets": [{"name": "gh.agent", "operations": [{"name": "gh.comment"}]}]}}`))
	require.NoError(t, err)
	return newCatalogue(append(ms, gh))
}

// validConfig uses every kind of object once.
const validConfig = `{
  "scopes": [{
    "id": "home", "title": "Home",
    "entries": [{"id": "inbox", "type": "notes", "config": {"digest": "07:30"}, "connection": "gh-main"}],
    "routes": [{"id": "review", "handler": "notes", "kind": "notes-review", "binding": "jobs", "config": {"tag": "todo"}}],
    "bindings": [{"name": "jobs", "executor": "runner", "executor_config": {"command": "true"}, "toolbelt": true,
                  "operations": ["notes.add"], "toolsets": ["gh.agent"], "connection": "gh-main", "pool": "job"}],
    "connections": ["gh-main"]
  }, {"id": "paused", "disabled": true}],
  "connections": [{"name": "gh-main", "type": "gh", "config": {"org": "acme"}, "secret_refs": {"token": "env:GH_TOKEN", "key": "file:/run/secrets/gh"}}],
  "settings": {"pass_env": {"notes": ["NOTES_HOME"]}, "webhooks": {"listen": "127.0.0.1:8787", "public_url": "https://hooks.example.com"}, "pools": {"job": 2}}
}`

func TestValidConfigHasNoDiagnostics(t *testing.T) {
	cfg, ds := ParseConfig([]byte(validConfig))
	require.Empty(t, ds)
	assert.Empty(t, checkStatic(cfg, testCatalogue(t)))
	assert.Equal(t, "env:GH_TOKEN", cfg.Connections[0].SecretRefs["token"])
}

// configCases each break one rule; the table is the place to add one. Each
// mutation is a JSON document merged over validConfig's scope 0 or root.
var configCases = []struct {
	name string
	doc  string // the whole document
	want []string
}{
	{"unknown root field", `{"scope": []}`, []string{"$.scope unknown_field"}},
	{"unknown nested field", `{"scopes": [{"id": "a", "entries": [{"id": "e", "type": "notes", "colour": 1}]}]}`, []string{"$.scopes[0].entries[0].colour unknown_field"}},
	{"syntax", `{"scopes": [}`, []string{"$.scopes invalid_json"}},
	{"duplicate key", `{"scopes": [], "scopes": []}`, []string{"$.scopes invalid_json"}},
	{"trailing data", `{} {}`, []string{"$ invalid_json"}},
	{"wrong type", `{"scopes": {}}`, []string{"$.scopes invalid_json"}},
	{"scope without id", `{"scopes": [{"title": "x"}]}`, []string{"$.scopes[0].id required"}},
	{"duplicate scope", `{"scopes": [{"id": "a"}, {"id": "a"}]}`, []string{"$.scopes[1].id duplicate"}},
	{"bad scope id", `{"scopes": [{"id": "a b"}]}`, []string{"$.scopes[0].id invalid_id"}},
	{"unknown entry type", `{"scopes": [{"id": "a", "entries": [{"id": "e", "type": "jira"}]}]}`, []string{"$.scopes[0].entries[0].type unknown_type"}},
	{"duplicate entry", `{"scopes": [{"id": "a", "entries": [{"id": "e", "type": "notes"}, {"id": "e", "type": "notes"}]}]}`, []string{"$.scopes[0].entries[1].id duplicate"}},
	{"unknown handler, kind and binding", `{"scopes": [{"id": "a", "routes": [{"handler": "x", "kind": "y", "binding": "z"}]}]}`,
		[]string{"$.scopes[0].routes[0].handler unknown_handler", "$.scopes[0].routes[0].kind unknown_work_kind", "$.scopes[0].routes[0].binding unknown_binding"}},
	{"route without kind", `{"scopes": [{"id": "a", "routes": [{"handler": "notes"}]}]}`, []string{"$.scopes[0].routes[0].kind required"}},
	{"unknown executor and operation", `{"scopes": [{"id": "a", "bindings": [{"name": "b", "executor": "shell", "toolbelt": true, "operations": ["x.y"], "toolsets": ["x.set"]}]}]}`,
		[]string{"$.scopes[0].bindings[0].executor unknown_executor", "$.scopes[0].bindings[0].operations[0] unknown_operation", "$.scopes[0].bindings[0].toolsets[0] unknown_toolset"}},
	{"grants without toolbelt", `{"scopes": [{"id": "a", "bindings": [{"name": "b", "executor": "runner", "operations": ["notes.add"]}]}]}`,
		[]string{"$.scopes[0].bindings[0].toolbelt toolbelt_off"}},
	{"unauthorized connection", `{"scopes": [{"id": "a", "entries": [{"id": "e", "type": "notes", "connection": "c"}]}], "connections": [{"name": "c", "type": "gh"}]}`,
		[]string{"$.scopes[0].entries[0].connection connection_not_authorized"}},
	{"undefined connection", `{"scopes": [{"id": "a", "connections": ["c"], "bindings": [{"name": "b", "executor": "runner", "connection": "d"}]}]}`,
		[]string{"$.scopes[0].connections[0] unknown_connection", "$.scopes[0].bindings[0].connection unknown_connection"}},
	{"connection type", `{"connections": [{"name": "c", "type": "jira"}]}`, []string{"$.connections[0].type unknown_connection_type"}},
	{"inline secret", `{"connections": [{"name": "c", "type": "gh", "secret_refs": {"token": "hunter2", "key": "file:relative", "x-y z": "vault:a"}}]}`,
		[]string{`$.connections[0].secret_refs.key secret_ref`, `$.connections[0].secret_refs.token secret_ref`, `$.connections[0].secret_refs["x-y z"] secret_ref`}},
	{"pass_env", `{"settings": {"pass_env": {"notes": ["OS_X", "OPEN_CONDUIT_Y", "A=B"], "jira": ["X"]}}}`,
		[]string{"$.settings.pass_env.jira unknown_package", "$.settings.pass_env.notes[0] pass_env_reserved", "$.settings.pass_env.notes[1] pass_env_reserved", "$.settings.pass_env.notes[2] invalid_id"}},
	{"webhooks", `{"settings": {"webhooks": {"listen": "0.0.0.0:80", "public_url": "https://u:p@example.com"}}}`,
		[]string{"$.settings.webhooks.listen invalid_address", "$.settings.webhooks.public_url invalid_url"}},
	{"pools", `{"settings": {"pools": {"job": 0}}}`, []string{"$.settings.pools.job invalid_pool"}},
}

func TestConfigDiagnostics(t *testing.T) {
	cat := testCatalogue(t)
	for _, tc := range configCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ds := ParseConfig([]byte(tc.doc))
			if ds == nil {
				ds = checkStatic(cfg, cat)
			}
			assert.ElementsMatch(t, tc.want, keys(ds), "every diagnostic of the document")
			for _, d := range ds {
				assert.NotEmpty(t, d.Message)
				assert.NotContains(t, d.Message, "hunter2", "never echo a secret")
				assert.True(t, strings.HasPrefix(d.Path, "$"), d.Path)
			}
		})
	}
}

func keys(ds []client.Diagnostic) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Path+" "+d.Rule)
	}
	return out
}

func TestOversizedDocumentIsRefused(t *testing.T) {
	doc := []byte(`{"scopes": [{"id": "a", "title": "` + strings.Repeat("x", MaxConfigBytes) + `"}]}`)
	_, ds := ParseConfig(doc)
	require.Len(t, ds, 1)
	assert.Equal(t, RuleJSON, ds[0].Rule)
	assert.Contains(t, ds[0].Message, "configuration is")
}

func TestEmptyDocumentIsTheEmptyConfiguration(t *testing.T) {
	for _, doc := range []string{"", "  \n", "{}"} {
		cfg, ds := ParseConfig([]byte(doc))
		require.Empty(t, ds, "%q", doc)
		assert.Empty(t, cfg.Scopes)
	}
}

// The README's example configuration is a real one: it parses and names
// only what the bundled packages declare.
func TestReadmeExampleConfigValidates(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- config-example -->\\s*```json\\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "README.md has no ```json block after <!-- config-example -->")
	cfg, ds := ParseConfig(m[1])
	require.Empty(t, ds)
	assert.Empty(t, checkStatic(cfg, testCatalogue(t)))
	assert.NotEmpty(t, cfg.Scopes)
}

func TestParamsCarrySecretNamesNeverReferences(t *testing.T) {
	cfg, ds := ParseConfig([]byte(validConfig))
	require.Empty(t, ds)
	m, err := protocol.LoadManifest("../../extensions/notes")
	require.NoError(t, err)
	gh, _ := protocol.ParseManifest([]byte(`{"name": "gh", "version": "1", "command": ["gh"], "protocol": [1], "provides": {"connections": [{"type": "gh"}]}}`))
	d := &Daemon{cat: testCatalogue(t)}
	p := d.paramsFor(cfg, &pkgRun{pkg: testPackage(gh)}, client.Generation{Number: 3, Hash: "sha256:x"})
	require.Len(t, p.Connections, 1)
	assert.Equal(t, []string{"key", "token"}, p.Connections[0].SecretNames)
	b, _ := json.Marshal(p)
	assert.NotContains(t, string(b), "GH_TOKEN")
	assert.NotContains(t, string(b), "/run/secrets")
	assert.Equal(t, int64(3), p.Generation)

	n := d.paramsFor(cfg, &pkgRun{pkg: testPackage(m)}, client.Generation{Number: 3})
	require.Len(t, n.Entries, 1)
	assert.Equal(t, "inbox", n.Entries[0].ID)
	assert.JSONEq(t, `{"digest":"07:30"}`, string(n.Entries[0].Config))
	assert.Empty(t, n.Connections, "gh-main is not of a notes connection type")
}

func TestSecretResolver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(path, []byte("s3cret\n"), 0o600))
	d := &Daemon{current: &Config{Connections: []ConnectionConfig{{Name: "c", Type: "gh",
		SecretRefs: map[string]string{"token": "env:TOKEN", "key": "file:" + path, "gone": "env:UNSET"}}}},
		environ: func() []string { return []string{"TOKEN=t0k"} }}
	r := &secretResolver{d: d}
	got, err := r.ResolveSecrets(t.Context(), "c", []string{"token", "key"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"token": "t0k", "key": "s3cret"}, got)
	_, err = r.ResolveSecrets(t.Context(), "c", []string{"gone"})
	assert.Error(t, err)
	_, err = r.ResolveSecrets(t.Context(), "c", []string{"missing"})
	assert.Error(t, err)
}

func TestLockNamesTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := acquireLock(path)
	require.NoError(t, err)
	_, err = acquireLock(path)
	var locked *LockedError
	require.ErrorAs(t, err, &locked)
	assert.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, os.Getpid(), locked.PID)
	first.release()
	again, err := acquireLock(path)
	require.NoError(t, err, "a released lock is free")
	again.release()
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	for _, tc := range configCases {
		f.Add([]byte(tc.doc))
	}
	cat := testCatalogue(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, ds := ParseConfig(doc)
		if ds != nil {
			require.Nil(t, cfg)
			for _, d := range ds {
				require.NotEmpty(t, d.Rule)
				require.True(t, strings.HasPrefix(d.Path, "$"))
			}
			return
		}
		require.NotNil(t, cfg)
		for _, d := range checkStatic(cfg, cat) {
			require.NotEmpty(t, d.Rule)
			require.True(t, strings.HasPrefix(d.Path, "$."), d.Path)
		}
		// What parses once parses again from its own encoding.
		b, err := json.Marshal(cfg)
		require.NoError(t, err)
		_, ds = ParseConfig(b)
		require.Empty(t, ds, "%s", b)
	})
}

func testPackage(m *protocol.Manifest) host.Package { return host.Package{Name: m.Name, Manifest: m} }

func TestRefusalMessagesAreOneClippedLine(t *testing.T) {
	got := clip(oneLine("bad\nforged: line\x1b[31m"+strings.Repeat("é", 400)), maxRefusalBytes)
	assert.NotContains(t, got, "\n")
	assert.NotContains(t, got, "\x1b")
	assert.LessOrEqual(t, len(got), maxRefusalBytes+len("…"))
	assert.True(t, utf8.ValidString(got))
}

// The configuration view keeps the secret keys and drops the references.
func TestDaemonConfigRedactsSecretReferences(t *testing.T) {
	cfg, ds := ParseConfig([]byte(validConfig))
	require.Empty(t, ds)
	d := &Daemon{current: cfg, gen: client.Generation{Number: 4}}
	view, gen := d.Config()
	assert.Equal(t, int64(4), gen.Number)
	assert.NotContains(t, string(view), "GH_TOKEN")
	assert.NotContains(t, string(view), "/run/secrets")
	var back Config
	require.NoError(t, json.Unmarshal(view, &back))
	assert.Equal(t, map[string]string{"token": "<redacted>", "key": "<redacted>"}, back.Connections[0].SecretRefs)
	assert.Equal(t, "env:GH_TOKEN", cfg.Connections[0].SecretRefs["token"], "the configuration in force is untouched")
}

// The engine's bindings are the enabled scopes' bindings, named
// scope/binding, with their executor config, toolbelt and grants (a
// toolset's operations included).
func TestTablesCarryBindings(t *testing.T) {
	cfg, ds := ParseConfig([]byte(validConfig))
	require.Empty(t, ds)
	d := &Daemon{cat: testCatalogue(t)}
	tables := d.tables(cfg)
	b, ok := tables.Bindings["home/jobs"]
	require.True(t, ok)
	assert.Equal(t, "runner", b.Executor)
	assert.JSONEq(t, `{"command":"true"}`, string(b.Config))
	assert.True(t, b.Toolbelt)
	assert.Equal(t, []string{"gh.comment", "notes.add"}, b.Operations)
	assert.Equal(t, "gh-main", b.Connection)
	require.Len(t, tables.Routes["home"], 1)
	assert.Equal(t, "home/jobs", tables.Routes["home"][0].Binding)
	assert.NotContains(t, tables.Routes, "paused", "a disabled scope routes nothing")
}
