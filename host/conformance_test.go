package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// openSuiteStore opens a store holding every scope and Work the specs
// name.
func openSuiteStore(ctx context.Context, dir string, specs []conformance.ExtensionSpec) (runtime.Store, error) {
	st, err := sqlite.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := conformance.SeedStore(ctx, st, specs); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// generationOf configures an extension with one entry in each scope; an
// entry's config names the spec's source of its scope, which the wire
// child registers (in process, configureResult does).
func generationOf(s conformance.ExtensionSpec) protocol.ConfigureParams {
	var p protocol.ConfigureParams
	for _, id := range s.Scopes {
		e := protocol.ConfigEntry{ScopeID: id, ID: "e-" + id, Type: s.Manifest.Name}
		for _, src := range s.Sources {
			if src.ScopeID == id {
				e.Config, _ = json.Marshal(map[string]any{"source": src.Name, "families": src.Families})
			}
		}
		p.Entries = append(p.Entries, e)
	}
	return p
}

// configureResult is what the extension's configure answers in process.
func configureResult(s conformance.ExtensionSpec) protocol.ConfigureResult {
	return protocol.ConfigureResult{Sources: s.Sources}
}

func inProcessServices(ctx context.Context, t *testing.T, specs []conformance.ExtensionSpec) (runtime.Store, map[string]*host.Service, error) {
	return servicesWith(ctx, t, specs, nil)
}

// servicesWith builds the services over one store; engine, when set,
// makes an engine over the store that the services emit through.
func servicesWith(ctx context.Context, t *testing.T, specs []conformance.ExtensionSpec, engine func(runtime.Store) (host.Engine, error)) (runtime.Store, map[string]*host.Service, error) {
	st, err := openSuiteStore(ctx, t.TempDir(), specs)
	if err != nil {
		return nil, nil, err
	}
	var eng host.Engine
	if engine != nil {
		if eng, err = engine(st); err != nil {
			st.Close()
			return nil, nil, err
		}
	}
	svcs := map[string]*host.Service{}
	for _, s := range specs {
		svc := host.NewService(host.ServiceConfig{Manifest: s.Manifest, Store: st, Engine: eng})
		if err := svc.Configure(generationOf(s), configureResult(s)); err != nil {
			st.Close()
			return nil, nil, err
		}
		svcs[s.Manifest.Name] = svc
	}
	return st, svcs, nil
}

// routedHost is a host that also routes the store's Events with the
// runtime's engine, for the suites' routing checks.
type routedHost struct {
	conformance.ExtensionHost
	st    runtime.Store
	specs []conformance.ExtensionSpec
}

func (r routedHost) Route(ctx context.Context, h runtime.RouteHandler) ([]runtime.RouteRecord, error) {
	return conformance.RouteStore(ctx, r.st, r.specs, h)
}

// routed makes h an ExtensionRouter over st, unless it routes its own way.
func routed(h conformance.ExtensionHost, st runtime.Store, specs []conformance.ExtensionSpec) conformance.ExtensionHost {
	if _, ok := h.(conformance.ExtensionRouter); ok {
		return h
	}
	return routedHost{h, st, specs}
}

// inProcessDriver reaches the host service directly: no JSON.
func inProcessDriver(t *testing.T) conformance.ExtensionHostDriver {
	return serviceDriver(t, func(_ runtime.Store, _ map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		return svc
	})
}

// serviceDriver builds in-process services and wraps each.
func serviceDriver(t *testing.T, wrap func(st runtime.Store, all map[string]*host.Service, svc *host.Service) conformance.ExtensionHost) conformance.ExtensionHostDriver {
	return conformance.ExtensionHostDriver{
		Routes: true,
		Start: func(ctx context.Context, specs []conformance.ExtensionSpec) (map[string]conformance.ExtensionHost, func() error, error) {
			st, svcs, err := inProcessServices(ctx, t, specs)
			if err != nil {
				return nil, nil, err
			}
			hosts := map[string]conformance.ExtensionHost{}
			for n, svc := range svcs {
				hosts[n] = routed(wrap(st, svcs, svc), st, specs)
			}
			return hosts, st.Close, nil
		},
	}
}

// relay is the host as a real extension process reaches it: the test
// asks the process (test.call) to make the call on its own connection, so
// params and results cross the wire as JSON both ways.
type relay struct{ p *host.Process }

func (r relay) Call(ctx context.Context, method string, params, result any) error {
	var raw json.RawMessage
	err := r.p.Call(ctx, "test.call", map[string]any{"method": method, "params": params}, &raw)
	if err != nil || result == nil {
		return err
	}
	return json.Unmarshal(raw, result)
}

// wireDriver starts each extension as a real process under the host.
func wireDriver(t *testing.T) conformance.ExtensionHostDriver { return wireDriverWith(t, nil) }

// wireDriverWith is wireDriver with each service passed to weaken first
// (a negative control), when it is set.
func wireDriverWith(t *testing.T, weaken func(*host.Service)) conformance.ExtensionHostDriver {
	return conformance.ExtensionHostDriver{
		Routes: true,
		Start: func(ctx context.Context, specs []conformance.ExtensionSpec) (map[string]conformance.ExtensionHost, func() error, error) {
			st, err := openSuiteStore(ctx, t.TempDir(), specs)
			if err != nil {
				return nil, nil, err
			}
			root, state := t.TempDir(), t.TempDir()
			hosts := map[string]conformance.ExtensionHost{}
			var procs []*host.Process
			stop := func() error {
				var errs []error
				for _, p := range procs {
					errs = append(errs, p.Close(context.Background()))
				}
				return errors.Join(append(errs, st.Close())...)
			}
			for _, s := range specs {
				m := *s.Manifest
				m.Command = []string{"ext", "child:good"}
				raw, err := json.Marshal(&m)
				if err != nil {
					return nil, nil, err
				}
				dir := writePackage(t, root, m.Name, raw)
				loaded, err := protocol.LoadManifest(dir)
				if err != nil {
					return nil, nil, err
				}
				svc := host.NewService(host.ServiceConfig{Manifest: loaded, Store: st})
				if weaken != nil {
					weaken(svc)
				}
				gen := generationOf(s)
				p, err := host.NewProcess(host.Config{Package: host.Package{Name: m.Name, Dir: dir, Manifest: loaded},
					StateRoot: state, Service: svc, Store: st, Configure: func() protocol.ConfigureParams { return gen }})
				if err != nil {
					return nil, nil, err
				}
				procs = append(procs, p)
				hosts[m.Name] = routed(relay{p}, st, specs)
			}
			for _, err := range host.StartAll(ctx, procs) {
				if err != nil {
					stop()
					return nil, nil, err
				}
			}
			return hosts, stop, nil
		},
	}
}

// engineDriver is the in-process service emitting through a runtime
// engine, as the daemon composes it.
func engineDriver(t *testing.T) conformance.ExtensionHostDriver {
	return conformance.ExtensionHostDriver{
		Routes: true,
		Start: func(ctx context.Context, specs []conformance.ExtensionSpec) (map[string]conformance.ExtensionHost, func() error, error) {
			var engine *runtime.Engine
			st, svcs, err := servicesWith(ctx, t, specs, func(st runtime.Store) (host.Engine, error) {
				var err error
				engine, err = runtime.New(runtime.Config{Store: st})
				return engine, err
			})
			if err != nil {
				return nil, nil, err
			}
			hosts := map[string]conformance.ExtensionHost{}
			for n, svc := range svcs {
				hosts[n] = routed(svc, st, specs)
			}
			return hosts, func() error { engine.Close(); return st.Close() }, nil
		},
	}
}

func TestExtensionKVInProcess(t *testing.T)  { conformance.RunExtensionKV(t, inProcessDriver(t)) }
func TestExtensionKVWithEngine(t *testing.T) { conformance.RunExtensionKV(t, engineDriver(t)) }
func TestExtensionEmissionsWithEngine(t *testing.T) {
	conformance.RunExtensionEmissions(t, engineDriver(t))
}
func TestExtensionKVOverTheWire(t *testing.T) {
	conformance.RunExtensionKV(t, wireDriver(t))
}
func TestExtensionEmissionsInProcess(t *testing.T) {
	conformance.RunExtensionEmissions(t, inProcessDriver(t))
}
func TestExtensionEmissionsOverTheWire(t *testing.T) {
	conformance.RunExtensionEmissions(t, wireDriver(t))
}

// ---- negative controls ----

// unscopedKV lets an extension reach any extension's namespace: the call
// goes to the service of whoever owns the namespace.
type unscopedKV struct {
	own *host.Service
	all map[string]*host.Service
}

func (u unscopedKV) Call(ctx context.Context, method string, params, result any) error {
	ns := ""
	switch p := params.(type) {
	case protocol.KVGetParams:
		ns = p.Namespace
	case protocol.KVListParams:
		ns = p.Namespace
	case protocol.KVCommitParams:
		for _, x := range p.Puts {
			ns = x.Namespace
		}
	}
	owner, _, _ := strings.Cut(ns, ".")
	if svc := u.all[owner]; svc != nil {
		return svc.Call(ctx, method, params, result)
	}
	return u.own.Call(ctx, method, params, result)
}

// nonAtomicKV applies a batch's writes one by one before it looks at the
// preconditions, and its emissions in a later call.
type nonAtomicKV struct{ svc *host.Service }

func (n nonAtomicKV) Call(ctx context.Context, method string, params, result any) error {
	p, ok := params.(protocol.KVCommitParams)
	if method != "kv.commit" || !ok {
		return n.svc.Call(ctx, method, params, result)
	}
	for _, put := range p.Puts {
		n.svc.Call(ctx, "kv.commit", protocol.KVCommitParams{Puts: []protocol.KVPut{put}}, nil)
	}
	for _, del := range p.Deletes {
		n.svc.Call(ctx, "kv.commit", protocol.KVCommitParams{Deletes: []protocol.KVKey{del}}, nil)
	}
	if len(p.Preconditions) > 0 {
		if err := n.svc.Call(ctx, "kv.commit", protocol.KVCommitParams{Preconditions: p.Preconditions}, nil); err != nil {
			return err
		}
	}
	return n.svc.Call(ctx, "kv.commit", protocol.KVCommitParams{Emissions: p.Emissions}, result)
}

// uncheckedEmitter accepts emissions straight into the store, skipping the
// host's checks.
type uncheckedEmitter struct {
	svc *host.Service
	st  runtime.Store
}

func (u uncheckedEmitter) Call(ctx context.Context, method string, params, result any) error {
	p, ok := params.(protocol.KVCommitParams)
	if method != "kv.commit" || !ok || len(p.Emissions) == 0 {
		return u.svc.Call(ctx, method, params, result)
	}
	var out protocol.KVCommitResult
	err := u.st.Transact(ctx, func(tx runtime.Tx) error {
		for _, e := range p.Emissions {
			ev, added, err := tx.AcceptEvent(runtime.Envelope{ID: protocol.EmittedEventID(e.Source, e.DeliveryID),
				Source: e.Source, DeliveryID: e.DeliveryID, ScopeID: e.ScopeID, Family: e.Family, Schema: e.Schema,
				Payload: e.Payload, Parent: e.Parent, Type: e.Type})
			if err != nil {
				return err
			}
			out.Accepted = append(out.Accepted, protocol.EmissionOutcome{Event: &protocol.Event{ID: ev.ID, Sequence: ev.Sequence,
				ScopeID: ev.ScopeID, Parent: ev.Parent, Root: ev.Root, Depth: ev.Depth}, Added: added})
		}
		var b runtime.KVBatch
		for _, x := range p.Puts {
			b.Puts = append(b.Puts, runtime.KVPut{Namespace: x.Namespace, Key: x.Key, Value: x.Value})
		}
		return tx.KVCommit(b)
	})
	if err != nil {
		return err
	}
	return protocol.SetResult(result, out)
}

// namedWorkRouter routes as if scope did not matter: it offers a handler
// the first Work an Event names and attaches a match to it. It writes
// nothing.
type namedWorkRouter struct {
	conformance.ExtensionHost
	st runtime.Store
}

func (n namedWorkRouter) Route(ctx context.Context, h runtime.RouteHandler) ([]runtime.RouteRecord, error) {
	var evs []runtime.Event
	works := map[string]runtime.Work{}
	err := n.st.View(ctx, func(r runtime.ReadTx) error {
		var err error
		if evs, err = r.Events(0, runtime.MaxPageLimit); err != nil {
			return err
		}
		for _, ev := range evs {
			for _, id := range ev.Works {
				if w, err := r.Work(id); err == nil {
					works[id] = w
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []runtime.RouteRecord
	for _, ev := range evs {
		in := runtime.RouteInput{ScopeID: ev.ScopeID, Event: ev}
		if len(ev.Works) > 0 {
			if w, ok := works[ev.Works[0]]; ok {
				in.Work = &w
			}
		}
		dec, err := h.Match(ctx, in)
		if err != nil {
			return nil, err
		}
		rec := runtime.RouteRecord{EventID: ev.ID, Disposition: runtime.DispositionUnmatched, Route: -1}
		switch {
		case dec.Match && in.Work != nil:
			rec.Disposition, rec.Route, rec.WorkID = runtime.DispositionAttached, 0, in.Work.ID
		case dec.Match:
			rec.Disposition, rec.Route, rec.WorkID = runtime.DispositionCreated, 0, "wk-for-"+ev.ID
		}
		out = append(out, rec)
	}
	return out, nil
}

func TestNegativeControlsFailTheSuites(t *testing.T) {
	ctx := ctxT(t)
	unscoped := serviceDriver(t, func(_ runtime.Store, all map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		return unscopedKV{own: svc, all: all}
	})
	nonAtomic := serviceDriver(t, func(_ runtime.Store, _ map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		return nonAtomicKV{svc}
	})
	unchecked := serviceDriver(t, func(st runtime.Store, _ map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		return uncheckedEmitter{svc: svc, st: st}
	})
	skipsWorkCheck := serviceDriver(t, func(_ runtime.Store, _ map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		host.SkipWorkCheck(svc)
		return svc
	})
	namedWork := serviceDriver(t, func(st runtime.Store, _ map[string]*host.Service, svc *host.Service) conformance.ExtensionHost {
		return namedWorkRouter{svc, st}
	})
	foreignWorkChecks := []string{"foreign_work_in_emission_answers_as_missing",
		"foreign_work_in_event_accept_answers_as_missing", "foreign_work_in_ingress_delivery_answers_as_missing"}
	for _, tc := range []struct {
		name  string
		check func(context.Context, conformance.ExtensionHostDriver) error
		d     conformance.ExtensionHostDriver
		want  []string
	}{
		{"host skipping the works check", conformance.CheckExtensionEmissions, skipsWorkCheck, foreignWorkChecks},
		{"host skipping the works check, over the wire", conformance.CheckExtensionEmissions, wireDriverWith(t, host.SkipWorkCheck), foreignWorkChecks},
		{"router offering any named Work", conformance.CheckExtensionEmissions, namedWork, []string{"routing_offers_only_the_events_scope"}},
		{"unscoped KV", conformance.CheckExtensionKV, unscoped, []string{"isolated_from_other_extensions", "foreign_namespace_refused"}},
		{"non-atomic commit", conformance.CheckExtensionKV, nonAtomic, []string{"batch_is_atomic"}},
		{"non-atomic emissions", conformance.CheckExtensionEmissions, nonAtomic, []string{"undeclared_family_applies_nothing"}},
		{"unchecked emitter", conformance.CheckExtensionEmissions, unchecked, []string{
			"undeclared_family_applies_nothing", "foreign_source_applies_nothing", "stale_schema_applies_nothing",
			"unconfigured_scope_applies_nothing", "causal_limit_refuses_alone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(ctx, tc.d)
			require.Error(t, err, "the suite passed a weakened host")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w+":")
			}
		})
	}
}
