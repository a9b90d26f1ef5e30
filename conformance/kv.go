package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// ExtensionHost is the host as one extension reaches it: each call is
// bound to that extension's identity. In process it is the host's scoped
// service; over the wire, a real extension process relaying the call on
// its own connection. params are wire values and result a pointer to the
// wire result, as protocol/sdk's Caller.
type ExtensionHost interface {
	Call(ctx context.Context, method string, params, result any) error
}

// ExtensionSpec is one extension a suite needs: its manifest (the driver
// supplies the command), the scopes whose configuration uses it, the
// ingress sources its configure registers and the Work of its kinds the
// store holds when the check starts.
type ExtensionSpec struct {
	Manifest *protocol.Manifest
	Scopes   []string
	// Sources are what the extension's configure answers: the host serves
	// ingress.deliver for them.
	Sources []protocol.SourceDecl
	// Works is Work as routing would have created it, there before the
	// extensions start (SeedStore writes it with the scopes).
	Works []runtime.Work
}

// ExtensionHostDriver starts a fresh host for one check of the extension
// suites.
type ExtensionHostDriver struct {
	// Start sets up a host whose store has every scope and Work the specs
	// name (SeedStore), configures each extension with an entry in each of
	// its scopes and the sources its spec names, and returns the host as
	// each extension reaches it, by name. stop ends it.
	Start func(ctx context.Context, specs []ExtensionSpec) (hosts map[string]ExtensionHost, stop func() error, err error)
	// Routes says every host Start returns is also an ExtensionRouter, so
	// the checks of what routing offers run; without it they are skipped.
	Routes bool
}

// ExtensionRouter routes what the extensions accepted: a host a driver
// returns implements it when the driver sets Routes.
type ExtensionRouter interface {
	// Route offers every Event not routed yet to handler, the one route
	// of each scope the specs name (RouteStore does it with the runtime's
	// engine over the host's store), and returns each Event's record.
	Route(ctx context.Context, handler runtime.RouteHandler) ([]runtime.RouteRecord, error)
}

// SeedStore writes every scope and Work the specs name into st, as a
// driver's Start does before the extensions start.
func SeedStore(ctx context.Context, st runtime.Store, specs []ExtensionSpec) error {
	return st.Transact(ctx, func(tx runtime.Tx) error {
		for _, s := range specs {
			for _, id := range s.Scopes {
				if _, err := tx.PutScope(runtime.Scope{ID: id, Name: id}); err != nil {
					return err
				}
			}
		}
		for _, s := range specs {
			for _, w := range s.Works {
				if _, err := tx.PutWork(w); err != nil {
					return fmt.Errorf("seeding work %s: %w", w.ID, err)
				}
			}
		}
		return nil
	})
}

// suiteRouteHandler is the one handler RouteStore routes every scope with.
const suiteRouteHandler = "conformance"

// RouteStore routes the Events st holds that are not routed yet with a
// runtime engine over it, each scope the specs name having one route on
// handler (creating Work of the scope's first extension's first kind),
// and returns the record of each Event it routed, in sequence order. It is
// how a driver implements ExtensionRouter.
func RouteStore(ctx context.Context, st runtime.Store, specs []ExtensionSpec, handler runtime.RouteHandler) ([]runtime.RouteRecord, error) {
	routes := map[string][]runtime.Route{}
	for _, s := range specs {
		kind := s.Manifest.Name
		if len(s.Manifest.Provides.WorkKinds) > 0 {
			kind = s.Manifest.Provides.WorkKinds[0].Name
		}
		for _, id := range s.Scopes {
			if routes[id] == nil {
				routes[id] = []runtime.Route{{Handler: suiteRouteHandler, Kind: kind}}
			}
		}
	}
	e, err := runtime.New(runtime.Config{Store: st, Routes: routes,
		Handlers: map[string]runtime.RouteHandler{suiteRouteHandler: handler}})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	from, err := e.RoutingCursor(ctx)
	if err != nil {
		return nil, err
	}
	for {
		n, err := e.RoutePending(ctx)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	var evs []runtime.Event
	err = st.View(ctx, func(r runtime.ReadTx) error {
		var err error
		evs, err = r.Events(from, runtime.MaxPageLimit)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []runtime.RouteRecord
	for _, ev := range evs {
		rec, err := e.RouteRecordOf(ctx, ev.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// ExtensionCheckTimeout bounds one check of the extension suites.
var ExtensionCheckTimeout = 2 * time.Minute

// The two extensions of the suites: alpha is configured in scope-a, beta
// in scope-b.
const (
	extAlpha = "alpha"
	extBeta  = "beta"
	scopeA   = "scope-a"
	scopeB   = "scope-b"
)

// suiteManifest is the manifest of one of the suites' extensions: one
// ingress type with one family and one payload schema, and one Work kind
// with its route handler.
func suiteManifest(name string) *protocol.Manifest {
	return &protocol.Manifest{
		Name: name, Version: "1.0.0", Command: []string{"bin/" + name}, Protocol: []protocol.Version{protocol.Version1},
		Provides: protocol.Provides{
			Extensions: []protocol.ExtensionDecl{{Type: name, Ingress: true,
				Families: []protocol.FamilyDecl{{Name: name + ".note", Rederivable: true}}}},
			Routes:    []protocol.RouteDecl{{Handler: name}},
			WorkKinds: []protocol.WorkKindDecl{{Name: suiteKind(name)}},
			Schemas:   []protocol.SchemaDecl{{Base: name + ".note", Versions: []int{1}}},
		},
	}
}

// suiteKind is the Work kind of the suite extension name.
func suiteKind(name string) string { return name + "-job" }

// The suites' Work: each extension's in its own scope, and alpha's of its
// own kind in beta's scope (which alpha may see, as state.work does, but
// routing must never offer for an Event of scope-a).
const (
	workAlpha          = "wk-alpha"
	workBeta           = "wk-beta"
	workAlphaElsewhere = "wk-alpha-elsewhere"
)

// SuiteSpecs are the extensions both suites start: a driver may check its
// own manifests against them.
func SuiteSpecs() []ExtensionSpec {
	work := func(id, scope, owner string) runtime.Work {
		return runtime.Work{ID: id, ScopeID: scope, Kind: suiteKind(owner), State: runtime.WorkPending,
			CorrelationKeys: []string{"key:" + id}, Display: json.RawMessage(`{"title":"` + id + `"}`)}
	}
	return []ExtensionSpec{
		{Manifest: suiteManifest(extAlpha), Scopes: []string{scopeA},
			Sources: []protocol.SourceDecl{{Name: extAlpha + "/in", ScopeID: scopeA, Families: []string{extAlpha + ".note"}}},
			Works:   []runtime.Work{work(workAlpha, scopeA, extAlpha), work(workAlphaElsewhere, scopeB, extAlpha)}},
		{Manifest: suiteManifest(extBeta), Scopes: []string{scopeB},
			Sources: []protocol.SourceDecl{{Name: extBeta + "/in", ScopeID: scopeB, Families: []string{extBeta + ".note"}}},
			Works:   []runtime.Work{work(workBeta, scopeB, extBeta)}},
	}
}

type extCheck struct {
	name string
	run  func(ctx context.Context, h map[string]ExtensionHost) error
}

// extSuite binds checks to d.
func extSuite(d ExtensionHostDriver, checks []extCheck) []namedCheck {
	return bind(checks, func(c extCheck) namedCheck {
		return namedCheck{name: c.name, run: func(ctx context.Context) error { return runExtCheck(ctx, d, c) }}
	})
}

func runExtCheck(ctx context.Context, d ExtensionHostDriver, c extCheck) (err error) {
	ctx, cancel := context.WithTimeout(ctx, ExtensionCheckTimeout)
	defer cancel()
	hosts, stop, err := d.Start(ctx, SuiteSpecs())
	if err != nil {
		return fmt.Errorf("starting the host: %w", err)
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the host: %w", serr)
		}
	}()
	for _, n := range []string{extAlpha, extBeta} {
		if hosts[n] == nil {
			return fmt.Errorf("the driver returned no host for %s", n)
		}
	}
	return c.run(ctx, hosts)
}

// CheckExtensionKV checks the namespaced KV an extension reaches through
// the host: reads and writes in its own namespaces, version and absence
// preconditions, all-or-nothing batches, paging, and isolation: no
// extension reads or writes another's namespace or the host's reserved
// one. It returns every failure joined; nil means the host conforms.
func CheckExtensionKV(ctx context.Context, d ExtensionHostDriver) error {
	return checkAll(ctx, extSuite(d, kvChecks))
}

// RunExtensionKV runs CheckExtensionKV's checks as named subtests.
func RunExtensionKV(t *testing.T, d ExtensionHostDriver) {
	t.Helper()
	runAll(t, extSuite(d, kvChecks))
}

var kvChecks = []extCheck{
	{"get_absent", checkExtKVGetAbsent},
	{"put_then_get", checkExtKVPutGet},
	{"version_precondition", checkExtKVVersion},
	{"absent_precondition", checkExtKVAbsent},
	{"batch_is_atomic", checkExtKVAtomic},
	{"delete", checkExtKVDelete},
	{"list_pages_by_prefix", checkExtKVList},
	{"sub_namespace", checkExtKVSubNamespace},
	{"foreign_namespace_refused", checkExtKVForeign},
	{"isolated_from_other_extensions", checkExtKVIsolation},
	{"reserved_namespace_unreachable", checkExtKVReserved},
}

func extGet(ctx context.Context, h ExtensionHost, ns, key string) (protocol.KVGetResult, error) {
	var r protocol.KVGetResult
	err := h.Call(ctx, "kv.get", protocol.KVGetParams{Namespace: ns, Key: key}, &r)
	return r, err
}

func extPut(ns, key, value string) protocol.KVPut {
	return protocol.KVPut{Namespace: ns, Key: key, Value: json.RawMessage(value)}
}

func extCommit(ctx context.Context, h ExtensionHost, p protocol.KVCommitParams) (protocol.KVCommitResult, error) {
	var r protocol.KVCommitResult
	err := h.Call(ctx, "kv.commit", p, &r)
	return r, err
}

// sameJSON compares two JSON values by meaning.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func wantValue(ctx context.Context, h ExtensionHost, ns, key, value string) error {
	r, err := extGet(ctx, h, ns, key)
	switch {
	case err != nil:
		return fmt.Errorf("kv.get %s/%s: %w", ns, key, err)
	case value == "" && r.Found:
		return fmt.Errorf("%s/%s holds %s, want absent", ns, key, r.Value)
	case value == "":
		return nil
	case !r.Found:
		return fmt.Errorf("%s/%s is absent, want %s", ns, key, value)
	case !sameJSON(r.Value, json.RawMessage(value)):
		return fmt.Errorf("%s/%s holds %s, want %s", ns, key, r.Value, value)
	}
	return nil
}

func checkExtKVGetAbsent(ctx context.Context, h map[string]ExtensionHost) error {
	r, err := extGet(ctx, h[extAlpha], extAlpha, "nothing")
	if err != nil {
		return err
	}
	if r.Found || r.Version != "" || len(r.Value) != 0 {
		return fmt.Errorf("absent entry read as %+v", r)
	}
	return nil
}

func checkExtKVPutGet(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "k", `{"n":1,"s":"x"}`)}}); err != nil {
		return err
	}
	r, err := extGet(ctx, a, extAlpha, "k")
	if err != nil {
		return err
	}
	if !r.Found || r.Version == "" || !sameJSON(r.Value, json.RawMessage(`{"n":1,"s":"x"}`)) {
		return fmt.Errorf("read back %+v", r)
	}
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "k", `2`)}}); err != nil {
		return err
	}
	r2, err := extGet(ctx, a, extAlpha, "k")
	if err != nil {
		return err
	}
	if r2.Version == r.Version {
		return fmt.Errorf("the version did not change with the value (%q)", r.Version)
	}
	return wantValue(ctx, a, extAlpha, "k", `2`)
}

func checkExtKVVersion(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "v", `1`)}}); err != nil {
		return err
	}
	r, err := extGet(ctx, a, extAlpha, "v")
	if err != nil {
		return err
	}
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: extAlpha, Key: "v", Version: r.Version}},
		Puts:          []protocol.KVPut{extPut(extAlpha, "v", `2`)}}); err != nil {
		return fmt.Errorf("a commit at the current version: %w", err)
	}
	_, err = extCommit(ctx, a, protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: extAlpha, Key: "v", Version: r.Version}},
		Puts:          []protocol.KVPut{extPut(extAlpha, "v", `3`)}})
	if !errors.Is(err, protocol.ErrConflict) {
		return fmt.Errorf("a commit at a stale version: got %v, want conflict", err)
	}
	return wantValue(ctx, a, extAlpha, "v", `2`)
}

func checkExtKVAbsent(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	once := protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: extAlpha, Key: "once", Absent: true}},
		Puts:          []protocol.KVPut{extPut(extAlpha, "once", `"first"`)}}
	if _, err := extCommit(ctx, a, once); err != nil {
		return err
	}
	once.Puts = []protocol.KVPut{extPut(extAlpha, "once", `"second"`)}
	if _, err := extCommit(ctx, a, once); !errors.Is(err, protocol.ErrConflict) {
		return fmt.Errorf("an absent precondition on a present key: got %v, want conflict", err)
	}
	return wantValue(ctx, a, extAlpha, "once", `"first"`)
}

func checkExtKVAtomic(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "b", `1`), extPut(extAlpha, "c", `1`)}}); err != nil {
		return err
	}
	_, err := extCommit(ctx, a, protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: extAlpha, Key: "b", Absent: true}},
		Puts:          []protocol.KVPut{extPut(extAlpha, "a", `1`), extPut(extAlpha, "b", `2`)},
		Deletes:       []protocol.KVKey{{Namespace: extAlpha, Key: "c"}},
	})
	if !errors.Is(err, protocol.ErrConflict) {
		return fmt.Errorf("a batch whose precondition fails: got %v, want conflict", err)
	}
	return errors.Join(wantValue(ctx, a, extAlpha, "a", ""), wantValue(ctx, a, extAlpha, "b", `1`), wantValue(ctx, a, extAlpha, "c", `1`))
}

func checkExtKVDelete(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "gone", `1`)}}); err != nil {
		return err
	}
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Deletes: []protocol.KVKey{{Namespace: extAlpha, Key: "gone"}}}); err != nil {
		return err
	}
	return wantValue(ctx, a, extAlpha, "gone", "")
}

func checkExtKVList(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	var puts []protocol.KVPut
	for i := range 5 {
		puts = append(puts, extPut(extAlpha, fmt.Sprintf("p/%d", i), fmt.Sprint(i)))
	}
	puts = append(puts, extPut(extAlpha, "q/0", `0`))
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: puts}); err != nil {
		return err
	}
	var keys []string
	after := ""
	for range 10 {
		var r protocol.KVListResult
		if err := a.Call(ctx, "kv.list", protocol.KVListParams{Namespace: extAlpha, Prefix: "p/", After: after, Limit: 2}, &r); err != nil {
			return err
		}
		if len(r.Items) > 2 {
			return fmt.Errorf("a page of limit 2 has %d items", len(r.Items))
		}
		for _, it := range r.Items {
			keys = append(keys, it.Key)
			if it.Version == "" {
				return fmt.Errorf("item %s has no version", it.Key)
			}
		}
		if r.Next == "" {
			break
		}
		after = r.Next
	}
	if got := strings.Join(keys, ","); got != "p/0,p/1,p/2,p/3,p/4" {
		return fmt.Errorf("listed %s, want p/0..p/4", got)
	}
	return nil
}

func checkExtKVSubNamespace(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	ns := extAlpha + ".cache"
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(ns, "k", `"sub"`)}}); err != nil {
		return fmt.Errorf("writing its own sub-namespace: %w", err)
	}
	return errors.Join(wantValue(ctx, a, ns, "k", `"sub"`), wantValue(ctx, a, extAlpha, "k", ""))
}

func checkExtKVForeign(ctx context.Context, h map[string]ExtensionHost) error {
	a, b := h[extAlpha], h[extBeta]
	var errs []error
	for _, ns := range []string{extBeta, extBeta + ".x", extAlpha + "x", "alpha-x"} {
		if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(ns, "k", `1`)}}); err == nil {
			errs = append(errs, fmt.Errorf("%s wrote namespace %q", extAlpha, ns))
		}
	}
	// A batch touching any foreign namespace applies nothing.
	if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extAlpha, "mixed", `1`), extPut(extBeta, "mixed", `1`)}}); err == nil {
		errs = append(errs, errors.New("a batch with a foreign put was accepted"))
	}
	errs = append(errs, wantValue(ctx, a, extAlpha, "mixed", ""), wantValue(ctx, b, extBeta, "mixed", ""), wantValue(ctx, b, extBeta, "k", ""))
	return errors.Join(errs...)
}

func checkExtKVIsolation(ctx context.Context, h map[string]ExtensionHost) error {
	a, b := h[extAlpha], h[extBeta]
	if _, err := extCommit(ctx, b, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(extBeta, "secret", `"beta's"`)}}); err != nil {
		return err
	}
	var errs []error
	if r, err := extGet(ctx, a, extBeta, "secret"); err == nil {
		errs = append(errs, fmt.Errorf("%s read %s's entry: %+v", extAlpha, extBeta, r))
	}
	var l protocol.KVListResult
	if err := a.Call(ctx, "kv.list", protocol.KVListParams{Namespace: extBeta}, &l); err == nil {
		errs = append(errs, fmt.Errorf("%s listed %s's namespace: %d items", extAlpha, extBeta, len(l.Items)))
	}
	if err := a.Call(ctx, "kv.list", protocol.KVListParams{Namespace: extAlpha}, &l); err != nil {
		errs = append(errs, err)
	}
	for _, it := range l.Items {
		if it.Key == "secret" {
			errs = append(errs, fmt.Errorf("%s's own namespace shows %s's entry", extAlpha, extBeta))
		}
	}
	return errors.Join(append(errs, wantValue(ctx, a, extAlpha, "secret", ""))...)
}

func checkExtKVReserved(ctx context.Context, h map[string]ExtensionHost) error {
	a := h[extAlpha]
	var errs []error
	for _, ns := range []string{"core.extensions", "core", "open-conduit"} {
		if r, err := extGet(ctx, a, ns, extAlpha); err == nil {
			errs = append(errs, fmt.Errorf("read the reserved namespace %q: %+v", ns, r))
		}
		if _, err := extCommit(ctx, a, protocol.KVCommitParams{Puts: []protocol.KVPut{extPut(ns, extAlpha, `99`)}}); err == nil {
			errs = append(errs, fmt.Errorf("wrote the reserved namespace %q", ns))
		}
	}
	return errors.Join(errs...)
}
