package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/runtime"
)

// DefaultMaxCausalDepth is the deepest a chain of derived Events may go
// (the runtime engine's default).
const DefaultMaxCausalDepth = 16

// SecretResolver gives the current secret values of a connection. The
// Service decides whether the extension may have them; the resolver only
// resolves.
type SecretResolver interface {
	ResolveSecrets(ctx context.Context, connection string, names []string) (map[string]string, error)
}

// Engine is the part of the runtime engine the service goes through when
// one runs, so an extension's emissions meet the engine's own checks and
// causal limits (depth and per-minute, each refusal recorded for the
// operator) and its cancellations stop running attempts, exactly as for an
// in-process caller. *runtime.Engine implements it.
type Engine interface {
	Emit(ctx context.Context, em runtime.Emitter, batch runtime.KVBatch, emissions []runtime.Emission) ([]runtime.EmissionOutcome, error)
	// EmitWith is Emit with records that join the transaction after the
	// outcomes (event.accept's writes, only with a newly added Event).
	EmitWith(ctx context.Context, em runtime.Emitter, batch runtime.KVBatch, emissions []runtime.Emission, commit runtime.EmitCommit) ([]runtime.EmissionOutcome, error)
	CancelWork(ctx context.Context, workID string) error
	// Kick wakes the engine after the service wrote Events or timers
	// through the store.
	Kick()
}

var _ Engine = (*runtime.Engine)(nil)

// ServiceConfig configures the host service of one extension.
type ServiceConfig struct {
	// Manifest is the identity: the package the host started. Nothing the
	// extension sends changes it.
	Manifest *protocol.Manifest
	// Store is the coordination store. Nil refuses every KV, state and
	// event method (offline validation).
	Store runtime.Store
	// Blobs keeps artifact content; nil refuses artifact.*.
	Blobs runtime.BlobStore
	// Secrets resolves secret values; nil refuses secret.resolve.
	Secrets SecretResolver
	// Telemetry records telemetry.capture's events; nil refuses them
	// (unsupported). The manifest's permission gates the method either way.
	Telemetry TelemetryRecorder
	// Engine, when set, accepts kv.commit emissions and event.accept's
	// derived Events under its causal limits and cancels Work; without it
	// the service writes through Store and bounds only a chain's depth.
	Engine Engine
	// MaxCausalDepth bounds derived chains without an Engine (default
	// DefaultMaxCausalDepth).
	MaxCausalDepth int
	// Logf receives the host's lines about refused calls.
	Logf func(format string, args ...any)
}

// Service is the host's side of every extension-to-host method, bound to
// one extension's identity. Call serves a call made in process (params a
// wire value, result a pointer to the wire result); Handler serves the
// same calls over the wire. It is safe for concurrent use.
type Service struct {
	cfg  ServiceConfig
	name string

	inTx atomic.Int32 // outstanding in-transaction calls

	// skipWorkCheck is set only by the tests' negative control
	// (export_test.go): namedWorks then lets every Work through.
	skipWorkCheck bool

	mu  sync.Mutex
	gen generation
	log func(format string, args ...any)

	artifacts artifactTable
}

// generation is what the last successful configure established.
type generation struct {
	scopes      map[string]bool
	sources     map[string]protocol.SourceDecl
	connections map[string]protocol.Connection
	// scopeConnections: per scope, the connections its entries and
	// bindings name that the extension may resolve there.
	scopeConnections map[string]map[string]bool
	// webhooks are the webhook paths it registered.
	webhooks []string
}

// NewService binds a service to the extension cfg.Manifest describes.
func NewService(cfg ServiceConfig) *Service {
	if cfg.MaxCausalDepth <= 0 {
		cfg.MaxCausalDepth = DefaultMaxCausalDepth
	}
	s := &Service{cfg: cfg, name: cfg.Manifest.Name}
	s.gen = generation{scopes: map[string]bool{}, sources: map[string]protocol.SourceDecl{},
		connections: map[string]protocol.Connection{}, scopeConnections: map[string]map[string]bool{}}
	return s
}

// Name is the extension the service is bound to.
func (s *Service) Name() string { return s.name }

// Configure records a configuration generation directly, as a successful
// configure does; an in-process attachment and tests use it.
func (s *Service) Configure(params protocol.ConfigureParams, res protocol.ConfigureResult) error {
	if err := CheckRegistrations(s.cfg.Manifest, params, res); err != nil {
		return err
	}
	s.setGeneration(params, res)
	return nil
}

func (s *Service) setGeneration(params protocol.ConfigureParams, res protocol.ConfigureResult) {
	g := generation{scopes: map[string]bool{}, sources: map[string]protocol.SourceDecl{},
		connections: map[string]protocol.Connection{}, scopeConnections: map[string]map[string]bool{}}
	types := map[string]bool{}
	for _, c := range s.cfg.Manifest.Provides.Connections {
		types[c.Type] = true
	}
	for _, c := range params.Connections {
		g.connections[c.Name] = c
	}
	bind := func(scope, conn string) {
		c, ok := g.connections[conn]
		if conn == "" || !ok || !types[c.Type] {
			return
		}
		if g.scopeConnections[scope] == nil {
			g.scopeConnections[scope] = map[string]bool{}
		}
		g.scopeConnections[scope][conn] = true
	}
	for _, list := range [][]protocol.ConfigEntry{params.Entries, params.Disabled} {
		for _, e := range list {
			g.scopes[e.ScopeID] = true
			bind(e.ScopeID, e.Connection)
			for _, b := range e.BindingConnections {
				bind(e.ScopeID, b)
			}
		}
	}
	for _, src := range res.Sources {
		g.sources[src.Name] = src
	}
	g.webhooks = slices.Clone(res.WebhookPaths)
	s.mu.Lock()
	s.gen = g
	s.mu.Unlock()
}

func (s *Service) generation() generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// setLog adds a sink for the service's lines (the extension's log).
func (s *Service) setLog(f func(format string, args ...any)) {
	s.mu.Lock()
	s.log = f
	s.mu.Unlock()
}

func (s *Service) logf(format string, args ...any) {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if log != nil {
		log(format, args...)
	}
	if s.cfg.Logf != nil {
		s.cfg.Logf("extension %s: "+format, append([]any{s.name}, args...)...)
	}
}

func (s *Service) enterTx() { s.inTx.Add(1) }
func (s *Service) exitTx()  { s.inTx.Add(-1) }

// serviceMethod serves one method: it decodes params itself and returns
// the wire result value.
type serviceMethod func(s *Service, ctx context.Context, params any) (any, error)

// serviceMethods are the extension-to-host methods the host serves.
var serviceMethods = map[string]serviceMethod{}

func init() {
	for name, m := range map[string]serviceMethod{
		"kv.get":                     serve((*Service).kvGet),
		"kv.list":                    serve((*Service).kvList),
		"kv.commit":                  serve((*Service).kvCommit),
		"event.accept":               serve((*Service).eventAccept),
		"state.work":                 serve((*Service).stateWork),
		"state.works":                serve((*Service).stateWorks),
		"state.executions":           serve((*Service).stateExecutions),
		"state.waits":                serve((*Service).stateWaits),
		"state.event":                serve((*Service).stateEvent),
		"state.events":               serve((*Service).stateEvents),
		"state.work_events":          serve((*Service).stateWorkEvents),
		"state.scope":                serve((*Service).stateScope),
		"state.scopes":               serve((*Service).stateScopes),
		"state.sequence":             serve((*Service).stateSequence),
		"state.timers":               serve((*Service).stateTimers),
		"timer.arm":                  serve((*Service).timerArm),
		"timer.cancel":               serve((*Service).timerCancel),
		"secret.resolve":             serve((*Service).secretResolve),
		"work.cancel":                serve((*Service).workCancel),
		"wait.progress":              serve((*Service).waitProgress),
		"ingress.deliver":            serve((*Service).ingressDeliver),
		"artifact.create":            serve((*Service).artifactCreate),
		"artifact.write":             serveChunk("artifact.write", (*Service).artifactWrite),
		"artifact.commit":            serve((*Service).artifactCommit),
		"artifact.abort":             serve((*Service).artifactAbort),
		"execution.persist_recovery": serve((*Service).persistRecovery),
	} {
		serviceMethods[name] = m
	}
}

// serve adapts a typed method: params are decoded as P (a P value, a *P or
// raw JSON), and the result is an R value.
func serve[P, R any](f func(*Service, context.Context, P) (R, error)) serviceMethod {
	return func(s *Service, ctx context.Context, params any) (any, error) {
		p, err := protocol.DecodeParams[P](params)
		if err != nil {
			return nil, err
		}
		return f(s, ctx, p)
	}
}

// ServedMethods lists the extension-to-host methods the service serves.
func ServedMethods() []string {
	out := make([]string, 0, len(serviceMethods))
	for n := range serviceMethods {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Call serves one extension-to-host call. params is a wire params value
// (or raw JSON), result a pointer to the wire result (nil discards it).
// A method the catalogue does not list, or a host-to-extension method, is
// method_not_found; one the manifest does not enable (its surface or
// permission undeclared) is undeclared; any call while an in-transaction
// call is outstanding is reentrant_call. Errors are *protocol.Error values.
func (s *Service) Call(ctx context.Context, method string, params, result any) error {
	v, err := s.call(ctx, method, params)
	if err != nil {
		return err
	}
	return protocol.SetResult(result, v)
}

func (s *Service) call(ctx context.Context, method string, params any) (any, error) {
	info, ok := protocol.LookupMethod(method)
	if !ok || info.Direction != protocol.ExtensionToHost {
		s.logf("refused %s: not a method the host serves", method)
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method not found: %q", method)
	}
	if s.inTx.Load() > 0 {
		s.logf("refused %s: an in-transaction call is outstanding", method)
		return nil, protocol.Errorf(protocol.CodeReentrantCall, "%s while an in-transaction call is outstanding", method)
	}
	if !s.cfg.Manifest.Enabled(method) {
		s.logf("refused %s: the manifest does not enable it", method)
		return nil, protocol.Errorf(protocol.CodeUndeclared, "%s is not enabled by the manifest of %s", method, s.name)
	}
	f, ok := serviceMethods[method]
	if !ok {
		s.logf("refused %s: this host does not serve it", method)
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "this host does not serve %q", method)
	}
	v, err := f(s, ctx, params)
	if err != nil {
		werr := wireError(err)
		switch protocol.CodeOf(werr) {
		case protocol.CodeConflict, protocol.CodeNotFound:
		case protocol.CodeInternal:
			s.logf("%s failed: %v", method, err)
		default:
			s.logf("refused %s: %v", method, werr)
		}
		return nil, werr
	}
	return v, nil
}

// Handler serves the service over the wire.
func (s *Service) Handler() jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.Notification {
			return nil, nil
		}
		v, err := s.call(ctx, req.Method, json.RawMessage(req.Params))
		if err != nil {
			return nil, err
		}
		return v, nil
	})
}

var errNoStore = protocol.NewError(protocol.CodeUnsupported, "no coordination store: KV, state and event methods are not available here")

func (s *Service) store() (runtime.Store, error) {
	if s.cfg.Store == nil {
		return nil, errNoStore
	}
	return s.cfg.Store, nil
}

// ---- KV ----

// ownNamespace refuses a namespace that is not the extension's.
func (s *Service) ownNamespace(ns string) error {
	if err := protocol.ValidNamespace(ns); err != nil {
		return err
	}
	if !protocol.Namespace(s.name, ns) {
		return protocol.Errorf(protocol.CodeUnauthorized, "namespace %q is not in the namespace of %s", ns, s.name)
	}
	return nil
}

func (s *Service) kvGet(ctx context.Context, p protocol.KVGetParams) (protocol.KVGetResult, error) {
	var out protocol.KVGetResult
	if err := s.ownNamespace(p.Namespace); err != nil {
		return out, err
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	err = st.View(ctx, func(tx runtime.ReadTx) error {
		e, found, err := tx.KVGet(p.Namespace, p.Key)
		if err != nil || !found {
			return err
		}
		out = protocol.KVGetResult{Found: true, Value: json.RawMessage(e.Value), Version: e.Version}
		return nil
	})
	return out, err
}

func clampLimit(limit int) int {
	switch {
	case limit <= 0:
		return runtime.DefaultPageLimit
	case limit > protocol.MaxPageLimit:
		return protocol.MaxPageLimit
	}
	return limit
}

func (s *Service) kvList(ctx context.Context, p protocol.KVListParams) (protocol.KVListResult, error) {
	out := protocol.KVListResult{Items: []protocol.KVItem{}}
	if err := s.ownNamespace(p.Namespace); err != nil {
		return out, err
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	limit := clampLimit(p.Limit)
	err = st.View(ctx, func(tx runtime.ReadTx) error {
		es, err := tx.KVList(p.Namespace, p.Prefix, p.After, limit)
		if err != nil {
			return err
		}
		for _, e := range es {
			out.Items = append(out.Items, protocol.KVItem{Key: e.Key, Value: json.RawMessage(e.Value), Version: e.Version})
		}
		if len(es) == limit {
			out.Next = es[len(es)-1].Key
		}
		return nil
	})
	return out, err
}

// kvBatch checks every namespace a batch names and converts it.
func (s *Service) kvBatch(pre []protocol.KVPrecondition, puts []protocol.KVPut, dels []protocol.KVKey) (runtime.KVBatch, error) {
	var b runtime.KVBatch
	for _, c := range pre {
		if err := s.ownNamespace(c.Namespace); err != nil {
			return b, err
		}
		b.Preconditions = append(b.Preconditions, runtime.KVPrecondition{Namespace: c.Namespace, Key: c.Key, Version: c.Version, Absent: c.Absent})
	}
	for _, p := range puts {
		if err := s.ownNamespace(p.Namespace); err != nil {
			return b, err
		}
		if len(p.Value) == 0 {
			return b, protocol.Errorf(protocol.CodeInvalid, "put of %s/%s has no value", p.Namespace, p.Key)
		}
		b.Puts = append(b.Puts, runtime.KVPut{Namespace: p.Namespace, Key: p.Key, Value: []byte(p.Value)})
	}
	for _, d := range dels {
		if err := s.ownNamespace(d.Namespace); err != nil {
			return b, err
		}
		b.Deletes = append(b.Deletes, runtime.KVKey{Namespace: d.Namespace, Key: d.Key})
	}
	return b, nil
}

func batchEmpty(b runtime.KVBatch) bool {
	return len(b.Preconditions) == 0 && len(b.Puts) == 0 && len(b.Deletes) == 0
}

// checkDraft applies the checks that need no store: the source is the
// extension's, the family is declared, the schema is writable, and a root
// is in a configured scope.
func (s *Service) checkDraft(g generation, e protocol.Emission) error {
	m := s.cfg.Manifest
	switch {
	case !protocol.SourceNamespace(s.name, e.Source):
		return protocol.Errorf(protocol.CodeUnauthorized, "source %q is not in the source namespace of %s", e.Source, s.name)
	case e.DeliveryID == "":
		return protocol.Errorf(protocol.CodeInvalid, "an Event needs a delivery_id")
	case !declaredFamilies(m)[e.Family]:
		return protocol.Errorf(protocol.CodeUndeclared, "family %q is not declared by %s", e.Family, s.name)
	}
	if err := m.CheckWrite(e.Schema); err != nil {
		return err
	}
	if e.Parent == "" && !g.scopes[e.ScopeID] {
		return protocol.Errorf(protocol.CodeUnauthorized, "scope %q is not one of the configured scopes of %s", e.ScopeID, s.name)
	}
	if e.Parent != "" && e.ScopeID != "" && !g.scopes[e.ScopeID] {
		return protocol.Errorf(protocol.CodeUnauthorized, "scope %q is not one of the configured scopes of %s", e.ScopeID, s.name)
	}
	return nil
}

// namedWorks checks every Work a draft names (its works) against the rule
// of state.work: a Work of one of the extension's configured scopes, or of
// one of its own kinds anywhere. A Work outside it is refused exactly as a
// Work that does not exist (not_found, the same message), so a draft is
// never an existence oracle and never files an Event under Work the
// extension may not see. kv.commit emissions, event.accept and
// ingress.deliver all check here, inside the transaction that accepts.
func (s *Service) namedWorks(tx runtime.ReadTx, g generation, works []string) error {
	if s.skipWorkCheck {
		return nil
	}
	for _, id := range works {
		w, err := tx.Work(id)
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
		if err != nil || !s.workVisible(g, w) {
			s.logf("a draft named work %q, which is outside its scopes and kinds or does not exist: refused as not_found", id)
			return workNotFound(id)
		}
	}
	return nil
}

// accept accepts one checked Emission in tx: a derived one's parent must be
// an accepted Event of the same, configured scope; over the chain's depth
// bound it is refused alone (ErrCausalLimit, nothing written).
func (s *Service) accept(tx runtime.Tx, g generation, e protocol.Emission) (runtime.Event, bool, error) {
	env := runtime.Envelope{
		ID: protocol.EmittedEventID(e.Source, e.DeliveryID), Source: e.Source, DeliveryID: e.DeliveryID,
		ScopeID: e.ScopeID, Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload,
		Parent: e.Parent, Works: e.Works, OccurredAt: e.OccurredAt,
	}
	if err := s.namedWorks(tx, g, e.Works); err != nil {
		return runtime.Event{}, false, err
	}
	if e.Parent != "" {
		parent, err := tx.Event(e.Parent)
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return runtime.Event{}, false, err
		}
		if err != nil || !g.scopes[parent.ScopeID] {
			return runtime.Event{}, false, protocol.Errorf(protocol.CodeInvalid, "parent %q is not an accepted Event of a configured scope of %s", e.Parent, s.name)
		}
		if e.ScopeID != "" && e.ScopeID != parent.ScopeID {
			return runtime.Event{}, false, protocol.Errorf(protocol.CodeInvalid, "a derived Event is in its parent's scope %q, not %q", parent.ScopeID, e.ScopeID)
		}
		env.ScopeID = parent.ScopeID
		if parent.Depth+1 > s.cfg.MaxCausalDepth {
			// An identity already accepted is not a new link of the chain.
			if old, err := tx.Event(env.ID); err == nil {
				return old, false, nil
			}
			return runtime.Event{}, false, protocol.Errorf(protocol.CodeCausalLimit, "the chain of %q is at its depth bound %d", e.Parent, s.cfg.MaxCausalDepth)
		}
	}
	return tx.AcceptEvent(env)
}

func (s *Service) kvCommit(ctx context.Context, p protocol.KVCommitParams) (protocol.KVCommitResult, error) {
	var out protocol.KVCommitResult
	batch, err := s.kvBatch(p.Preconditions, p.Puts, p.Deletes)
	if err != nil {
		return out, err
	}
	g := s.generation()
	for i, e := range p.Emissions {
		if err := s.checkDraft(g, e); err != nil {
			return out, fmt.Errorf("emission %d: %w", i, err)
		}
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	if s.cfg.Engine != nil {
		return s.kvCommitEngine(ctx, st, g, batch, p.Emissions)
	}
	var outcomes []protocol.EmissionOutcome
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		outcomes = outcomes[:0]
		for i, e := range p.Emissions {
			ev, added, err := s.accept(tx, g, e)
			if errors.Is(err, protocol.ErrCausalLimit) {
				s.logf("emission %d refused alone: %v", i, err)
				outcomes = append(outcomes, protocol.EmissionOutcome{Refused: protocol.CodeCausalLimit})
				continue
			}
			if err != nil {
				return fmt.Errorf("emission %d: %w", i, err)
			}
			wev := wireEvent(ev)
			outcomes = append(outcomes, protocol.EmissionOutcome{Event: &wev, Added: added})
		}
		if batchEmpty(batch) {
			return nil
		}
		return tx.KVCommit(batch)
	})
	if err != nil {
		return out, err
	}
	out.Accepted = outcomes
	return out, nil
}

func (s *Service) eventAccept(ctx context.Context, p protocol.EventAcceptParams) (protocol.EventAcceptResult, error) {
	var out protocol.EventAcceptResult
	if p.Parent == "" {
		return out, protocol.Errorf(protocol.CodeInvalid, "event.accept only derives: parent is required (a root Event comes from ingress or a kv.commit emission)")
	}
	batch, err := s.kvBatch(p.Preconditions, p.Puts, p.Deletes)
	if err != nil {
		return out, err
	}
	e := protocol.Emission{Source: p.Source, DeliveryID: p.DeliveryID, Family: p.Family, Type: p.Type,
		Schema: p.Schema, Payload: p.Payload, Parent: p.Parent, Works: p.Works, OccurredAt: p.OccurredAt}
	g := s.generation()
	if err := s.checkDraft(g, e); err != nil {
		return out, err
	}
	st, err := s.store()
	if err != nil {
		return out, err
	}
	if s.cfg.Engine != nil {
		return s.eventAcceptEngine(ctx, st, g, batch, e)
	}
	err = st.Transact(ctx, func(tx runtime.Tx) error {
		ev, added, err := s.accept(tx, g, e)
		if err != nil {
			return err
		}
		out = protocol.EventAcceptResult{Event: wireEvent(ev), Added: added}
		if added && !batchEmpty(batch) {
			return tx.KVCommit(batch)
		}
		return nil
	})
	if errors.Is(err, protocol.ErrCausalLimit) {
		s.logf("event.accept refused: %v", err)
	}
	if err == nil {
		s.kick()
	}
	return out, err
}

func (s *Service) kick() {
	if s.cfg.Engine != nil {
		s.cfg.Engine.Kick()
	}
}

// Scopes lists the scopes the last configuration generation configured
// the extension in, sorted.
func (s *Service) Scopes() []string {
	g := s.generation()
	out := make([]string, 0, len(g.scopes))
	for id := range g.scopes {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// emitter is the extension's emission authority for the engine.
func (s *Service) emitter() runtime.Emitter {
	return emitterOf(s.cfg.Manifest, s.Scopes())
}

// emitterOf is the emission authority of the extension m configured in
// scopes: its families, and its own Work kinds for the Work an Emission
// may name.
func emitterOf(m *protocol.Manifest, scopes []string) runtime.Emitter {
	em := runtime.Emitter{Name: m.Name, Scopes: scopes}
	for f := range declaredFamilies(m) {
		em.Families = append(em.Families, f)
	}
	slices.Sort(em.Families)
	for _, k := range m.Provides.WorkKinds {
		em.Kinds = append(em.Kinds, k.Name)
	}
	return em
}

// engineEmissions converts checked emissions for the engine. A derived
// emission without a scope takes its parent's, which must be visible.
func (s *Service) engineEmissions(ctx context.Context, st runtime.Store, g generation, ems []protocol.Emission) ([]runtime.Emission, error) {
	rems := make([]runtime.Emission, len(ems))
	err := st.View(ctx, func(tx runtime.ReadTx) error {
		for i, e := range ems {
			if err := s.namedWorks(tx, g, e.Works); err != nil {
				return fmt.Errorf("emission %d: %w", i, err)
			}
			scope := e.ScopeID
			if e.Parent != "" {
				parent, err := tx.Event(e.Parent)
				if err != nil && !errors.Is(err, runtime.ErrNotFound) {
					return err
				}
				if err != nil || !g.scopes[parent.ScopeID] || scope != "" && scope != parent.ScopeID {
					return protocol.Errorf(protocol.CodeInvalid, "emission %d: parent %q is not an accepted Event of the emission's configured scope", i, e.Parent)
				}
				scope = parent.ScopeID
			}
			rems[i] = runtime.Emission{Source: e.Source, DeliveryID: e.DeliveryID, ScopeID: scope, Family: e.Family,
				Type: e.Type, Schema: e.Schema, Payload: e.Payload, Parent: e.Parent, Works: e.Works, OccurredAt: e.OccurredAt}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rems, nil
}

// kvCommitEngine hands a checked batch to the engine.
func (s *Service) kvCommitEngine(ctx context.Context, st runtime.Store, g generation, batch runtime.KVBatch, ems []protocol.Emission) (protocol.KVCommitResult, error) {
	var out protocol.KVCommitResult
	rems, err := s.engineEmissions(ctx, st, g, ems)
	if err != nil {
		return out, err
	}
	outcomes, err := s.cfg.Engine.Emit(ctx, s.emitter(), batch, rems)
	if err != nil {
		return out, err
	}
	for i, o := range outcomes {
		if o.Refused != nil {
			s.logf("emission %d refused alone: %v", i, o.Refused)
			out.Accepted = append(out.Accepted, protocol.EmissionOutcome{Refused: protocol.CodeOf(wireError(o.Refused))})
			continue
		}
		ev := wireEvent(o.Event)
		out.Accepted = append(out.Accepted, protocol.EmissionOutcome{Event: &ev, Added: o.Added})
	}
	return out, nil
}

// eventAcceptEngine accepts event.accept's derived Event through the
// engine, so its chain meets the engine's causal limits (depth and
// per-minute, the refusal recorded) as a kv.commit emission does. Its
// writes join the transaction only with a newly added Event.
func (s *Service) eventAcceptEngine(ctx context.Context, st runtime.Store, g generation, batch runtime.KVBatch, e protocol.Emission) (protocol.EventAcceptResult, error) {
	var out protocol.EventAcceptResult
	rems, err := s.engineEmissions(ctx, st, g, []protocol.Emission{e})
	if err != nil {
		return out, err
	}
	outcomes, err := s.cfg.Engine.EmitWith(ctx, s.emitter(), runtime.KVBatch{}, rems, commitIfAdded(batch))
	if err != nil {
		return out, err
	}
	if o := outcomes[0]; o.Refused != nil {
		s.logf("event.accept refused: %v", o.Refused)
		return out, wireError(o.Refused)
	}
	return protocol.EventAcceptResult{Event: wireEvent(outcomes[0].Event), Added: outcomes[0].Added}, nil
}

// commitIfAdded joins batch to an emission transaction whose one Emission
// was newly added.
type commitIfAdded runtime.KVBatch

func (c commitIfAdded) Commit(outcomes []runtime.EmissionOutcome) (runtime.KVBatch, error) {
	if len(outcomes) != 1 || !outcomes[0].Added {
		return runtime.KVBatch{}, nil
	}
	return runtime.KVBatch(c), nil
}
