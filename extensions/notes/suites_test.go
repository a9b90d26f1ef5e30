package notes_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// releaseEnv tells the test binary serving "extension-run notes" which
// release to serve (default 3); the host passes it through PassEnv.
const releaseEnv = "NOTES_TEST_RELEASE"

// hosting is how the real host runs notes: attached in process (no
// JSON) or as a supervised process speaking the protocol.
type hosting struct {
	name  string
	start func(t *testing.T, ctx context.Context, svcStore runtime.Store, params protocol.ConfigureParams) host.Conn
}

func manifestOf(t *testing.T, raw []byte) *protocol.Manifest {
	t.Helper()
	m, err := protocol.ParseManifest(raw)
	require.NoError(t, err)
	return m
}

var hostings = []hosting{
	{"in_process", func(t *testing.T, ctx context.Context, st runtime.Store, params protocol.ConfigureParams) host.Conn {
		svc := host.NewService(host.ServiceConfig{Manifest: manifestOf(t, notes.Extension().Manifest), Store: st})
		ext, err := sdk.Attach(notes.Extension(), svc)
		require.NoError(t, err)
		att, err := host.Attach(ctx, ext, svc, t.TempDir(), params)
		require.NoError(t, err)
		return att
	}},
	{"process", func(t *testing.T, ctx context.Context, st runtime.Store, params protocol.ConfigureParams) host.Conn {
		p, err := notesProcess(t, st, ".", 3, params)
		require.NoError(t, err)
		require.NoError(t, p.Start(ctx))
		return p
	}},
}

// notesProcess is the host's supervised process of the package in dir,
// served by this test binary as open-conduit extension-run notes would
// serve it, at the given release.
func notesProcess(t *testing.T, st runtime.Store, dir string, release int, params protocol.ConfigureParams) (*host.Process, error) {
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	m, err := protocol.LoadManifest(abs)
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	p, err := host.NewProcess(host.Config{
		Package:    host.Package{Name: m.Name, Dir: abs, Manifest: m},
		StateRoot:  t.TempDir(),
		Executable: exe,
		PassEnv:    []string{releaseEnv},
		Environ:    func() []string { return append(os.Environ(), releaseEnv+"="+strconv.Itoa(release)) },
		Service:    host.NewService(host.ServiceConfig{Manifest: m, Store: st}),
		Store:      st,
		Configure:  func() protocol.ConfigureParams { return params },
	})
	if err == nil {
		t.Cleanup(func() { p.Close(context.Background()) })
	}
	return p, err
}

func openStore(t *testing.T) runtime.Store {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// entryIn is one notes entry, "inbox", in scope with its store in dir.
func entryIn(scope, dir string) protocol.ConfigureParams {
	cfg, _ := json.Marshal(map[string]string{"dir": dir})
	return protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: scope, ID: "inbox", Type: notes.Name, Config: cfg}}}
}

func records(items []conformance.IngressItem) []notes.Record {
	var out []notes.Record
	for _, it := range items {
		out = append(out, notes.Record{ID: it.ID, Rev: it.Version, Title: it.Body})
	}
	return out
}

// TestIngressSuite runs the shared ingress suite against the notes source,
// hosted both ways.
func TestIngressSuite(t *testing.T) {
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			const scope = "conformance"
			source := notes.SourceName(scope, "inbox")
			conformance.RunIngress(t, conformance.IngressDriver{
				Name: source,
				NewSource: func(ctx context.Context, items []conformance.IngressItem) (runtime.IngressSource, error) {
					store := notes.Store{Dir: t.TempDir()}
					for _, r := range records(items) {
						if err := store.Put(r); err != nil {
							return nil, err
						}
					}
					conn := h.start(t, ctx, openStore(t), entryIn(scope, store.Dir))
					decl := protocol.SourceDecl{Name: source, ScopeID: scope, Families: []string{notes.FamilyNote}, Reconcile: true}
					return host.NewRemote(conn).Ingress(decl, notes.Name, "inbox"), nil
				},
				Deliver: func(items []conformance.IngressItem) runtime.Delivery {
					body, _ := json.Marshal(notes.Delivery{Notes: records(items)})
					return runtime.Delivery{Body: body}
				},
				NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
			})
		})
	}
}

// TestToolbeltSuite runs the shared toolbelt suite against notes.add: one
// note per request ID, across a lost commit of its result.
func TestToolbeltSuite(t *testing.T) {
	for _, h := range hostings {
		t.Run(h.name, func(t *testing.T) {
			conformance.RunToolbelt(t, conformance.ToolbeltDriver{
				New: func(ctx context.Context) (conformance.ToolbeltTarget, error) {
					store := notes.Store{Dir: t.TempDir()}
					conn := h.start(t, ctx, openStore(t), entryIn(conformance.ToolbeltScope, store.Dir))
					spec := host.NewRemote(conn).Operations()[notes.OpAdd]
					return conformance.ToolbeltTarget{Name: notes.OpAdd, Operation: spec.Operation, Owner: spec.Owner,
						Input: json.RawMessage(`{"title":"a note"}`),
						Effects: func(ctx context.Context) (int, error) {
							ids, err := store.IDs()
							return len(ids), err
						}}, nil
				},
				NewStore: func() (runtime.Store, error) { return sqlite.Open(t.TempDir()) },
			})
		})
	}
}
