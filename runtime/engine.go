package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Reserved KV namespaces the engine keeps its own records in. No extension
// can address them: an extension's namespaces are its name or name.*, and
// no extension may be named "core".
const (
	// NamespaceIngress holds reconcile snapshots and checkpoints.
	NamespaceIngress = "core.ingress"
	// NamespaceRouting holds the routing cursor and each Event's route
	// record.
	NamespaceRouting = "core.routing"
	// NamespaceScheduler holds each Work's input cursor.
	NamespaceScheduler = "core.scheduler"
	// NamespaceCausal holds per-chain rate windows and refused emissions.
	NamespaceCausal = "core.causal"
)

// Timer kinds the engine arms for itself.
const (
	// TimerRetry holds a Work back until its retry backoff has passed.
	TimerRetry = "core.retry"
	// TimerWait expires a Wait at its deadline.
	TimerWait = "core.wait"
)

// The capacity pools.
const (
	PoolAgent = "agent"
	PoolJob   = "job"
)

// Binding says which executor runs a Work and in which capacity pool.
type Binding struct {
	Executor string
	// Pool is the capacity pool (PoolAgent, PoolJob or a configured one);
	// empty means PoolJob.
	Pool string
	// Connection and Operations make the Authority of the binding's
	// executions.
	Connection string
	Operations []string
	// Config is the binding's executor config, given to each run as is.
	Config json.RawMessage
	// Toolbelt gives the binding's runs the toolbelt: each attempt gets
	// an endpoint and a token from Config.Toolbelt.
	Toolbelt bool
}

// Emitter is an extension's emission authority.
type Emitter struct {
	// Name is the extension: its sources are Name or Name/…, its KV
	// namespaces Name or Name.….
	Name string
	// Families are the Event families it declared.
	Families []string
	// Scopes are the scopes configured to use it.
	Scopes []string
	// Kinds are its own Work kinds. An Emission may name (works) a Work of
	// one of Scopes or of one of Kinds, as the extension's state reads
	// see; any other is refused as a Work that does not exist.
	Kinds []string
}

// OperationSpec registers a toolbelt operation.
type OperationSpec struct {
	Operation Operation
	// Owner provides the operation: it owns the Waits the operation
	// declares and its emissions are checked against it.
	Owner Emitter
	// Filter, optional, decides which Events wake the Owner's Waits.
	Filter DependencyFilter
}

// Source registers an ingress source.
type Source struct {
	ScopeID string
	Ingress IngressSource
	// PageLimit caps a reconcile page; 0 means DefaultPageLimit.
	PageLimit int
}

// CausalLimits bound a causal chain. Zero fields mean the defaults.
type CausalLimits struct {
	MaxDepth  int // default 16
	PerMinute int // Events per chain per minute, default 120
}

// RetryPolicy governs failed attempts. Zero fields mean the defaults.
type RetryPolicy struct {
	MaxAttempts int           // default 3
	Initial     time.Duration // default 1s, doubled per attempt
	Max         time.Duration // default 5m
}

// Config composes an Engine. Maps are read, never written, by the engine.
// The registration tables (Sources, Routes, Handlers, Bindings, Executors,
// WorkKinds, Recurrences, Operations, Pools) can be replaced whole while
// the engine runs (Reconfigure); the other fields are fixed by New.
type Config struct {
	Store Store
	// Clock defaults to SystemClock.
	Clock Clock
	// Holder names this engine as a lease holder; default "engine".
	Holder string
	// LeaseTTL is an execution lease's lifetime; default one hour. The
	// scheduler supersedes a lease when it starts or adopts an attempt,
	// and the observer renews it every third of the TTL while the run is
	// alive, so the TTL bounds only how long a dead observer's lease holds
	// off another holder.
	LeaseTTL time.Duration
	// Toolbelt, optional, issues the toolbelt endpoint and token of each
	// attempt whose binding grants the toolbelt.
	Toolbelt ToolbeltIssuer

	Sources     map[string]Source         // by source name
	Routes      map[string][]Route        // by scope ID, in order
	Handlers    map[string]RouteHandler   // by handler name
	Bindings    map[string]Binding        // by binding name
	Executors   map[string]Executor       // by executor name
	WorkKinds   map[string]WorkKindPolicy // by Work kind; absent: not standing, first input
	Recurrences map[string]Recurrence     // by timer kind
	Operations  map[string]OperationSpec  // by operation name
	Pools       map[string]int            // capacity by pool; default 4 each
	Causal      CausalLimits
	Retry       RetryPolicy
	// OnError, optional, hears errors of background work (observers and
	// Run) that have no caller to return to.
	OnError func(error)
}

// Engine is the coordination core: ingress, routing, scheduling, waits,
// timers, causal limits, emissions and the toolbelt, over one Store. It is
// safe for concurrent use. It never holds a store transaction across a call
// to a driven contract, except the in-transaction callbacks (WorkKindPolicy,
// Recurrence, DependencyFilter, EmitCommit).
//
//   - Ingress (Accept, Push, Reconcile): a push returns only after its
//     Events are committed; a reconcile scan diffs each page by (item,
//     version) against the source's snapshot, and only a complete scan
//     infers absence and stores its checkpoint. Snapshots and checkpoints
//     live in NamespaceIngress.
//   - Routing (RoutePending, RouteTrace): Events after the routing cursor
//     are offered to their scope's routes in order, handlers called on a
//     snapshot outside any transaction; a match wakes Waits on its
//     correlation keys and attaches the Event to open Work holding one of
//     them, or creates Work (display, context and grants on creation;
//     display replaced on later matches, dropped whole if over a limit).
//     Each Event's RouteRecord and the cursor live in NamespaceRouting.
//   - Scheduling (StartPending, Adopt): pending Work starts on its
//     binding's executor within its pool's capacity, one Execution per
//     attempt under the lease "work/<id>" at a new epoch; every write on
//     the attempt's behalf is fenced by that epoch. The observer renews the
//     lease every third of LeaseTTL while the run is alive and stops
//     observing, writing nothing more, once a renewal finds it superseded.
//     A run gets its binding's executor config and, when the binding
//     grants the toolbelt, an endpoint and token from Config.Toolbelt. A crash of the executor
//     is recovered, a run that cannot be adopted is stopped and retried,
//     failures retry with exponential backoff (a TimerRetry timer).
//   - Waits and timers (DeclareWait, SetWaitProgress, ArmTimer, FireDue).
//   - Emissions and the toolbelt (Emit, Call), with causal limits per chain
//     kept in NamespaceCausal.
//
// Step runs one pass of the background work; Run loops it.
type Engine struct {
	// cur is the configuration in force. Every operation reads it once
	// through conf and works on that snapshot, so a Reconfigure never
	// splits one routing decision, start or call across two tables.
	cur   atomic.Pointer[engineConf]
	store Store
	clock Clock

	mu      sync.Mutex
	running map[string]int         // running executions by pool
	scans   map[string]*sync.Mutex // one reconcile scan per source at a time
	kick    chan struct{}

	// routedTail is one more than the sequence through which this engine
	// last committed routing (a routed push, a routing pass), every
	// Event up to it routed (0: not known). A push predicts its Events
	// from it without a read, the accepting transaction checking the
	// prediction (pushroute.go); a routing pass with nothing after it
	// reads nothing (routedThroughCommitted).
	routedTail atomic.Int64
	// cursorCurrent is set once the routing cursor is known to live under
	// routingCursorKey (no legacy key to drop), so a routed push need not
	// read it (pushroute.go).
	cursorCurrent atomic.Bool

	observers sync.WaitGroup
	// adopting counts the adoptions whose recovery is still under way.
	adopting sync.WaitGroup
	// observeCtx outlives any one call: observations end with Close.
	observeCtx context.Context
	stop       context.CancelFunc
}

// New builds an Engine from cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: engine needs a store", ErrInvalid)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Holder == "" {
		cfg.Holder = "engine"
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = time.Hour
	}
	if cfg.Causal.MaxDepth <= 0 {
		cfg.Causal.MaxDepth = 16
	}
	if cfg.Causal.PerMinute <= 0 {
		cfg.Causal.PerMinute = 120
	}
	if cfg.Retry.MaxAttempts <= 0 {
		cfg.Retry.MaxAttempts = 3
	}
	if cfg.Retry.Initial <= 0 {
		cfg.Retry.Initial = time.Second
	}
	if cfg.Retry.Max <= 0 {
		cfg.Retry.Max = 5 * time.Minute
	}
	c, err := newConf(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		store:   cfg.Store,
		clock:   cfg.Clock,
		running: map[string]int{},
		scans:   map[string]*sync.Mutex{},
		kick:    make(chan struct{}, 1),
	}
	e.cur.Store(c)
	e.observeCtx, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// engineConf is one configuration of the engine: the Config and what the
// engine derives from it.
type engineConf struct {
	Config
	filters map[string]DependencyFilter // by the operation owner's name
}

// newConf checks cfg's tables and derives what the engine needs from them.
func newConf(cfg Config) (*engineConf, error) {
	for scope, routes := range cfg.Routes {
		for i, r := range routes {
			if _, ok := cfg.Handlers[r.Handler]; !ok {
				return nil, fmt.Errorf("%w: scope %q route %d names unknown handler %q", ErrInvalid, scope, i, r.Handler)
			}
			if r.Kind == "" {
				return nil, fmt.Errorf("%w: scope %q route %d has no work kind", ErrInvalid, scope, i)
			}
		}
	}
	for name, b := range cfg.Bindings {
		if _, ok := cfg.Executors[b.Executor]; !ok {
			return nil, fmt.Errorf("%w: binding %q names unknown executor %q", ErrInvalid, name, b.Executor)
		}
	}
	c := &engineConf{Config: cfg, filters: map[string]DependencyFilter{}}
	for _, op := range cfg.Operations {
		if op.Filter != nil {
			c.filters[op.Owner.Name] = op.Filter
		}
	}
	return c, nil
}

// conf is the configuration in force.
func (e *Engine) conf() *engineConf { return e.cur.Load() }

// Reconfigure replaces the registration tables (Sources, Routes, Handlers,
// Bindings, Executors, WorkKinds, Recurrences, Operations, Pools) at once,
// checked as New checks them; the other fields of cfg are ignored and keep
// what New was given. It is how a daemon applies a new configuration
// without a restart: a pass, a start or a call already under way finishes
// on the tables it began with, the next one sees the new ones, and running
// executions go on, observed as before (each holds its own executor). The
// maps must not be written after the call. A refusal changes nothing.
func (e *Engine) Reconfigure(cfg Config) error {
	old := e.conf()
	next := old.Config
	next.Sources, next.Routes, next.Handlers, next.Bindings = cfg.Sources, cfg.Routes, cfg.Handlers, cfg.Bindings
	next.Executors, next.WorkKinds, next.Recurrences = cfg.Executors, cfg.WorkKinds, cfg.Recurrences
	next.Operations, next.Pools = cfg.Operations, cfg.Pools
	c, err := newConf(next)
	if err != nil {
		return err
	}
	e.cur.Store(c)
	e.Kick()
	return nil
}

// Close stops observing executions (the runs themselves go on) and waits
// for the observers to return. It does not close the Store.
func (e *Engine) Close() {
	e.stop()
	e.observers.Wait()
}

// Drain waits until every execution this engine observes has ended and
// its outcome is recorded.
func (e *Engine) Drain() { e.observers.Wait() }

// Step runs one pass of the engine's work: fire due timers, route pending
// Events, start pending Work. A failing phase does not hold up the others;
// their errors are joined. Run calls it in a loop; tests call it after
// moving a fake clock.
func (e *Engine) Step(ctx context.Context) error {
	var errs []error
	if _, err := e.FireDue(ctx); err != nil {
		errs = append(errs, fmt.Errorf("fire timers: %w", err))
	}
	for {
		n, err := e.RoutePending(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("route: %w", err))
			break
		}
		if n == 0 {
			break
		}
	}
	if _, err := e.StartPending(ctx); err != nil {
		errs = append(errs, fmt.Errorf("schedule: %w", err))
	}
	return errors.Join(errs...)
}

// StepRetry is how long Run waits before retrying a pass that failed (a
// route handler's error, a recurrence's), absent other wake-ups.
const StepRetry = time.Second

// Run steps the engine until ctx ends: after every accepted Event, wake
// or settled execution, when the earliest timer falls due, and StepRetry
// after a pass that failed. Errors go to Config.OnError. A pass under way
// when ctx ends is finished, not cut short (a start cut off before its
// executor answered would count as a failed attempt): Run takes no new
// work after ctx ends and returns once the pass is done.
func (e *Engine) Run(ctx context.Context) error {
	for {
		wait := time.Duration(-1)
		err := e.Step(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			e.report(err)
			wait = StepRetry
		}
		now := e.clock.Now()
		if due, ok, err := e.nextDue(ctx); err == nil && ok {
			if d := max(due.Sub(now), 0); wait < 0 || d < wait {
				wait = d
			}
		}
		if wait == 0 {
			continue
		}
		wake := make(chan struct{}, 1)
		stop := func() bool { return false }
		if wait > 0 {
			stop = e.clock.AfterFunc(wait, func() { wake <- struct{}{} })
			// The clock may have moved past the deadline while the timer
			// was being set; then it would fire late, so go round now.
			if !e.clock.Now().Before(now.Add(wait)) {
				stop()
				continue
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-e.kick:
		case <-wake:
		}
		stop()
	}
}

// Kick asks Run for another pass.
func (e *Engine) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) nextDue(ctx context.Context) (time.Time, bool, error) {
	var due time.Time
	var ok bool
	err := e.store.View(ctx, func(r ReadTx) error {
		ts, err := r.DueTimers(e.clock.Now().Add(horizon), 1)
		if err != nil || len(ts) == 0 {
			return err
		}
		due, ok = ts[0].Due, true
		return nil
	})
	return due, ok, err
}

// horizon is how far ahead Run looks for the next timer; a century keeps
// the time within what a store's nanosecond timestamps represent.
const horizon = 100 * 365 * 24 * time.Hour

func (e *Engine) report(err error) {
	if c := e.conf(); err != nil && c.OnError != nil {
		c.OnError(err)
	}
}

// newID returns prefix followed by 128 random bits in hex: unguessable.
func newID(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

// kvGetJSON reads a JSON record from a reserved namespace.
func kvGetJSON(r ReadTx, ns, key string, v any) (bool, error) {
	entry, found, err := r.KVGet(ns, key)
	if err != nil || !found {
		return false, err
	}
	if err := json.Unmarshal(entry.Value, v); err != nil {
		return false, fmt.Errorf("runtime: stored record %s/%q: %w", ns, key, err)
	}
	return true, nil
}

// kvPut is a put of v's JSON form.
func kvPut(ns, key string, v any) KVPut {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the engine's own record types pass through here
	}
	return KVPut{Namespace: ns, Key: key, Value: b}
}

// keyJoin joins key parts with NUL, which no identifier contains, so a
// prefix of parts never matches a longer part.
func keyJoin(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return string(b)
}

// isNotFound reports ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
