package sdk_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// The extension suites (KV, emissions) run here with every call made by
// the SDK's Host client, against the real host service on the SQLite
// store: the client's typed helpers must carry each call, its result and
// its refusal unchanged, in process and over a JSON-RPC connection. An
// emission at a schema the manifest cannot write is refused by the client
// before it crosses (Host.Commit's early check), with the code the host
// would answer; the host's own refusal is covered by the host's tests.

// throughHost is the host as the suites reach it, every call made through
// an sdk.Host: the methods the client has helpers for go through them,
// the rest through Host.Call.
type throughHost struct{ h *sdk.Host }

func (c throughHost) Call(ctx context.Context, method string, params, result any) error {
	var (
		v   any
		err error
	)
	switch p := params.(type) {
	case protocol.KVGetParams:
		v, err = c.h.Get(ctx, p.Namespace, p.Key)
	case protocol.KVListParams:
		v, err = c.h.List(ctx, p)
	case protocol.KVCommitParams:
		v, err = c.h.Commit(ctx, p)
	case protocol.EventAcceptParams:
		v, err = c.h.EventAccept(ctx, p)
	case protocol.IDParams:
		if method != "state.event" {
			return c.h.Call(ctx, method, params, result)
		}
		var ev protocol.Event
		ev, err = c.h.Event(ctx, p.ID)
		v = protocol.EventResult{Event: ev}
	default:
		return c.h.Call(ctx, method, params, result)
	}
	if err != nil {
		return err
	}
	return protocol.SetResult(result, v)
}

// suiteServices opens an SQLite store holding every scope and Work the
// specs name and a host service per spec, configured with one entry in
// each of its scopes and the sources its spec registers.
func suiteServices(ctx context.Context, t *testing.T, specs []conformance.ExtensionSpec) (runtime.Store, map[string]*host.Service, error) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		return nil, nil, err
	}
	err = conformance.SeedStore(ctx, st, specs)
	svcs := map[string]*host.Service{}
	for _, s := range specs {
		if err != nil {
			break
		}
		var gen protocol.ConfigureParams
		for _, id := range s.Scopes {
			gen.Entries = append(gen.Entries, protocol.ConfigEntry{ScopeID: id, ID: "e-" + id, Type: s.Manifest.Name})
		}
		svc := host.NewService(host.ServiceConfig{Manifest: s.Manifest, Store: st})
		err = svc.Configure(gen, protocol.ConfigureResult{Sources: s.Sources})
		svcs[s.Manifest.Name] = svc
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, svcs, nil
}

// sdkHostDriver gives each suite extension an sdk.Host over its service,
// made by connect: the service itself in process, or a connection to it.
func sdkHostDriver(t *testing.T, connect func(svc *host.Service) (sdk.Caller, func() error, error)) conformance.ExtensionHostDriver {
	return conformance.ExtensionHostDriver{
		Start: func(ctx context.Context, specs []conformance.ExtensionSpec) (map[string]conformance.ExtensionHost, func() error, error) {
			st, svcs, err := suiteServices(ctx, t, specs)
			if err != nil {
				return nil, nil, err
			}
			var closers []func() error
			stop := func() error {
				var errs []error
				for _, c := range closers {
					errs = append(errs, c())
				}
				return errors.Join(append(errs, st.Close())...)
			}
			hosts := map[string]conformance.ExtensionHost{}
			for _, s := range specs {
				c, closeConn, err := connect(svcs[s.Manifest.Name])
				if err != nil {
					stop()
					return nil, nil, err
				}
				closers = append(closers, closeConn)
				hosts[s.Manifest.Name] = throughHost{sdk.NewHost(c, s.Manifest)}
			}
			return hosts, stop, nil
		},
	}
}

// inProcessSDK calls the service directly: no JSON.
func inProcessSDK(t *testing.T) conformance.ExtensionHostDriver { return sdkHostDriver(t, directConn) }

func directConn(svc *host.Service) (sdk.Caller, func() error, error) {
	return svc, func() error { return nil }, nil
}

// wireSDK calls the service over a JSON-RPC connection on OS pipes, the
// host's side served by the service's handler, as an extension process
// reaches its host.
func wireSDK(t *testing.T) conformance.ExtensionHostDriver { return sdkHostDriver(t, pipeConn) }

// pipeConn connects to svc over OS pipes: the host's side is served by
// the service's handler, the extension's side is the returned Caller.
func pipeConn(svc *host.Service) (sdk.Caller, func() error, error) {
	toHostR, toHostW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	toExtR, toExtW, err := os.Pipe()
	if err != nil {
		toHostR.Close()
		toHostW.Close()
		return nil, nil, err
	}
	hostSide := jsonrpc.NewConn(toHostR, toExtW, svc.Handler(), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	extSide := jsonrpc.NewConn(toExtR, toHostW, nil, &jsonrpc.Options{DecodeError: sdk.DecodeError})
	return extSide, func() error {
		extSide.Close()
		hostSide.Close()
		return nil
	}, nil
}

func TestExtensionKVThroughSDKHost(t *testing.T) {
	t.Run("in_process", func(t *testing.T) { conformance.RunExtensionKV(t, inProcessSDK(t)) })
	t.Run("over_the_wire", func(t *testing.T) { conformance.RunExtensionKV(t, wireSDK(t)) })
}

func TestExtensionEmissionsThroughSDKHost(t *testing.T) {
	t.Run("in_process", func(t *testing.T) { conformance.RunExtensionEmissions(t, inProcessSDK(t)) })
	t.Run("over_the_wire", func(t *testing.T) { conformance.RunExtensionEmissions(t, wireSDK(t)) })
}

// TestSDKHostSuitesNegativeControl: the same suites fail through a
// client whose every Host calls as the first extension, so one extension
// reaches another's namespace and emits as it.
func TestSDKHostSuitesNegativeControl(t *testing.T) {
	var first *host.Service
	shared := sdkHostDriver(t, func(svc *host.Service) (sdk.Caller, func() error, error) {
		if first == nil {
			first = svc
		}
		return first, func() error { first = nil; return nil }, nil
	})
	err := conformance.CheckExtensionKV(testContext(t), shared)
	require.Error(t, err, "the KV suite passed a client that calls as another extension")
	assert.Contains(t, err.Error(), "isolated_from_other_extensions:")
	err = conformance.CheckExtensionEmissions(testContext(t), shared)
	require.Error(t, err, "the emissions suite passed a client that calls as another extension")
	assert.Contains(t, err.Error(), "parent_in_another_scope_applies_nothing:")
}

// TestUpdateOnTheRealHost: Update's transaction against the real host
// both ways: a write that lands between its read and its commit makes the
// host answer conflict, Update reads again and commits on the fresh
// value, and the Event its Txn emits is accepted with the record naming
// it, in one batch.
func TestUpdateOnTheRealHost(t *testing.T) {
	for _, way := range []struct {
		name    string
		connect func(svc *host.Service) (sdk.Caller, func() error, error)
	}{{"in_process", directConn}, {"over_the_wire", pipeConn}} {
		t.Run(way.name, func(t *testing.T) {
			ctx := testContext(t)
			specs := conformance.SuiteSpecs()
			st, svcs, err := suiteServices(ctx, t, specs)
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			alpha := specs[0].Manifest
			c, closeConn, err := way.connect(svcs[alpha.Name])
			require.NoError(t, err)
			t.Cleanup(func() { closeConn() })
			h := sdk.NewHost(c, alpha)
			other := sdk.NewHost(svcs[alpha.Name], alpha)

			_, err = h.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: alpha.Name, Key: "count", Value: []byte(`1`)}}})
			require.NoError(t, err)
			attempts := 0
			var id string
			r, err := h.Update(ctx, func(tx *sdk.Txn) error {
				attempts++
				var n int
				if _, err := tx.GetJSON(alpha.Name, "count", &n); err != nil {
					return err
				}
				if attempts == 1 { // another writer gets there first
					if _, err := other.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: alpha.Name, Key: "count", Value: []byte(`10`)}}}); err != nil {
						return err
					}
				}
				id = tx.Emit(protocol.Emission{Source: alpha.Name + "/in", DeliveryID: "counted", ScopeID: "scope-a",
					Family: alpha.Name + ".note", Schema: alpha.Name + ".note.v1", Payload: []byte(`{"text":"counted"}`)})
				if err := tx.Put(alpha.Name, "by-event", id); err != nil {
					return err
				}
				return tx.Put(alpha.Name, "count", n+1)
			})
			require.NoError(t, err)
			assert.Equal(t, 2, attempts, "the conflict made Update run again")
			require.Len(t, r.Accepted, 1)
			require.NotNil(t, r.Accepted[0].Event)
			assert.Equal(t, id, r.Accepted[0].Event.ID)
			got, err := h.Get(ctx, alpha.Name, "count")
			require.NoError(t, err)
			assert.JSONEq(t, `11`, string(got.Value), "the retry read the other writer's value")
			got, err = h.Get(ctx, alpha.Name, "by-event")
			require.NoError(t, err)
			assert.JSONEq(t, `"`+id+`"`, string(got.Value))
			ev, err := h.Event(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, alpha.Name+".note", ev.Family)
		})
	}
}
