package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// The lifecycle states of a server.
const (
	stateNew      = iota // before initialize succeeded
	stateReady           // initialized
	stateShutdown        // shutdown received
)

// server is one served extension: the dispatch shared by Serve (over the
// wire) and Attach (in process).
type server struct {
	ext      *Extension
	manifest *protocol.Manifest
	// enabled is manifest.Enabled for every method, worked out once: the
	// manifest never changes, and Enabled rebuilds its surfaces each time,
	// which cost a sixth of a small request's CPU.
	enabled map[string]bool
	// served is the dispatch table's entry of every method enabled, so
	// a request finds what serves it with one lookup, outside the lock.
	served map[string]methodFunc
	// operations is each operation's handlers and declared kind (the
	// first declaration's), by name, worked out once for the same reason
	// (one lookup a call).
	operations map[string]operationEntry
	// anyPure says an operation has Pure (servedInline).
	anyPure bool
	host    *Host
	logf    func(string, ...any)
	// readerConn, when set, says for a request whose handler the
	// transport's reader started which Conn that is (ServeConn), so the
	// handler's context can pass the reading on (inflightCall.Done).
	readerConn func(method string, ctx context.Context) *jsonrpc.Conn

	mu    sync.Mutex
	state int
	// inflight counts the requests in flight (begin to end); a count, not
	// a set: cancelling them all is cancelling stop, which each call's
	// own context watches once it has one (inflightCall.own).
	inflight int
	// stop ends the contexts of the requests in flight when shutdown's
	// grace is over (cancelInflight).
	stop       context.Context
	cancelStop context.CancelFunc
	// idle is closed when inflight drops to 0; nil until shutdown waits
	// on it, so a request costs no channel.
	idle chan struct{}
	// Over the wire, requests carry their place on the stream (seq, from
	// 1) and their handlers start in any order. shutdownSeq is the
	// shutdown's place: a request read before it is still served, even
	// when its handler starts after shutdown did. arrivals tracks which
	// requests have been admitted (served or refused), so shutdown can wait
	// for every request read before it.
	shutdownSeq uint64
	arrivals    arrivals
}

// arrivals records which requests, numbered from 1, have arrived.
type arrivals struct {
	upTo    uint64              // every request 1..upTo has arrived
	beyond  map[uint64]struct{} // arrived past upTo, out of order
	changed chan struct{}       // closed and replaced on every arrival
}

// arrive records request seq; the caller holds s.mu.
func (a *arrivals) arrive(seq uint64) {
	if seq == 0 || seq <= a.upTo {
		return
	}
	if seq == a.upTo+1 && len(a.beyond) == 0 {
		a.upTo++ // in order, the usual case: no map
		if a.changed != nil {
			close(a.changed)
			a.changed = nil
		}
		return
	}
	if a.beyond == nil {
		a.beyond = map[uint64]struct{}{}
	}
	a.beyond[seq] = struct{}{}
	for {
		if _, ok := a.beyond[a.upTo+1]; !ok {
			break
		}
		delete(a.beyond, a.upTo+1)
		a.upTo++
	}
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// wait returns a channel closed on the next arrival; the caller holds s.mu.
func (a *arrivals) wait() <-chan struct{} {
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.changed
}

// inflightCall is one request in flight, and the context its handler
// gets. That context is the transport's request context (ended by
// $/cancel or the connection's end) until something needs one the server
// can cancel on its own: shutdown cancelling what is in flight, or the
// handler asking for Done (to wait, to call the host, to derive a context
// of its own). Only then is a child made, so a handler that answers
// without looking costs the transport's context and no second one.
type inflightCall struct {
	parent context.Context
	// stop is the server's: its end ends the call's context too.
	stop context.Context
	// conn is set when the transport's reader started the handler
	// (servedEager): asking for Done passes the reading on first
	// (jsonrpc.Conn.ReleaseReader), so the messages behind the request,
	// its own $/cancel included, are read at once rather than at the
	// Eager deadline.
	conn  *jsonrpc.Conn
	mu    sync.Mutex
	child atomic.Pointer[cancellable]
	// result holds operation.call's answer over the wire, which the
	// transport reads once the handler returned, so returning it costs
	// no allocation of its own (serveOperationCall).
	result protocol.OperationCallResult
}

type cancellable struct {
	ctx      context.Context
	cancel   context.CancelFunc
	stopStop func() bool // unregisters the watch on the server's stop
}

// own returns the call's own cancellable context, made on first use.
func (c *inflightCall) own() *cancellable {
	if k := c.child.Load(); k != nil {
		return k
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.child.Load(); k != nil {
		return k
	}
	ctx, cancel := context.WithCancel(c.parent)
	k := &cancellable{ctx: ctx, cancel: cancel, stopStop: context.AfterFunc(c.stop, cancel)}
	c.child.Store(k)
	return k
}

func (c *inflightCall) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *inflightCall) Done() <-chan struct{} {
	if c.conn != nil {
		c.conn.ReleaseReader()
	}
	return c.own().ctx.Done()
}

func (c *inflightCall) Err() error {
	if k := c.child.Load(); k != nil {
		return k.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if c.stop.Err() != nil {
		return context.Canceled // as the child's would be
	}
	return nil
}

func (c *inflightCall) Value(key any) any {
	if k := c.child.Load(); k != nil {
		return k.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// finish releases the child context, if one was made.
func (c *inflightCall) finish() {
	if k := c.child.Load(); k != nil {
		k.stopStop()
		k.cancel()
	}
}

// newServer parses ext's manifest and checks ext against it.
func newServer(ext *Extension, host Caller) (*server, error) {
	if ext == nil {
		return nil, errors.New("sdk: nil Extension")
	}
	if host == nil {
		return nil, errors.New("sdk: nil host Caller")
	}
	m, err := protocol.ParseManifest(ext.Manifest)
	if err != nil {
		return nil, fmt.Errorf("sdk: manifest: %w", err)
	}
	if err := checkExtension(ext, m); err != nil {
		return nil, err
	}
	s := &server{
		ext:        ext,
		manifest:   m,
		enabled:    map[string]bool{},
		served:     map[string]methodFunc{},
		operations: map[string]operationEntry{},
		logf:       ext.Logf,
	}
	s.stop, s.cancelStop = context.WithCancel(context.Background())
	for _, mt := range m.EnabledMethods() {
		s.enabled[mt.Name] = true
		if f, ok := dispatch[mt.Name]; ok {
			s.served[mt.Name] = f
		}
	}
	for name, op := range ext.Operations {
		s.operations[name] = operationEntry{op: op}
		s.anyPure = s.anyPure || op.Pure != nil
	}
	for _, d := range m.Provides.Operations {
		if e, ok := s.operations[d.Name]; ok && !e.declared {
			e.kind, e.declared = d.Kind, true
			s.operations[d.Name] = e
		}
	}
	if s.logf == nil {
		l := log.New(os.Stderr, m.Name+": ", log.LstdFlags)
		s.logf = l.Printf
	}
	s.host = NewHost(host, m)
	s.host.upcast = s.readable
	return s, nil
}

// call serves one host-to-extension request. params is a wire params value
// in either form protocol.DecodeParams accepts, or over the wire the
// *jsonrpc.Request (plainParams). seq is the request's place
// on the stream (jsonrpc.Request.Seq), or 0 in process, where calls have
// no order of their own. The error, if any, is a *protocol.Error or the
// context's error when ctx ended.
func (s *server) call(ctx context.Context, seq uint64, method string, params any) (res any, err error) {
	defer func() {
		// A panicking handler answers internal, in process as over the wire.
		if p := recover(); p != nil {
			s.logf("%s: handler panicked: %v\n%s", method, p, debug.Stack())
			res, err = nil, protocol.NewError(protocol.CodeInternal, "internal error")
		}
	}()
	res, err = s.serve(ctx, seq, method, params)
	if err == nil {
		return res, nil
	}
	return nil, s.wireError(ctx, method, err)
}

func (s *server) serve(ctx context.Context, seq uint64, method string, params any) (any, error) {
	// An enabled method is one of the catalogue's.
	f, served := s.served[method]
	// The state the request is served in and, for a method of the dispatch
	// table, its place among the requests in flight are taken under one
	// lock, together with its arrival: once shutdown has seen a request
	// arrive, the request is either in flight or refused.
	s.mu.Lock()
	state := s.stateFor(seq)
	var c *inflightCall
	if state == stateReady && served {
		c = s.beginLocked(method, ctx)
	}
	s.arrivals.arrive(seq)
	s.mu.Unlock()
	if c != nil {
		defer s.end(c)
		return f(s, c, params)
	}
	params = plainParams(params)
	mt, known := protocol.LookupMethod(method)
	switch {
	case !known || mt.Direction == protocol.ExtensionToHost:
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "method %q is not one an extension serves", method)
	case method == "initialize" && state == stateNew:
		return s.initialize(ctx, params)
	case state == stateShutdown:
		return nil, protocol.Errorf(protocol.CodeShuttingDown, "shutting down: %s refused", method)
	case state == stateNew:
		return nil, protocol.Errorf(protocol.CodeInvalid, "%s before initialize: no other method is valid until initialize succeeds", method)
	case method == "initialize":
		return nil, protocol.Errorf(protocol.CodeInvalid, "initialize already succeeded")
	case method == "shutdown":
		return s.shutdown(ctx, seq)
	case !s.enabled[method]:
		return nil, protocol.Errorf(protocol.CodeUndeclared, "the manifest of %q does not enable %s", s.manifest.Name, method)
	default:
		return nil, protocol.Errorf(protocol.CodeMethodNotFound, "%s is not served by this extension", method)
	}
}

// stateFor is the state request seq is served in; the caller holds s.mu.
// A request read before shutdown (a lower seq) is served as before it.
func (s *server) stateFor(seq uint64) int {
	if s.state == stateShutdown && seq != 0 && seq < s.shutdownSeq {
		return stateReady
	}
	return s.state
}

// beginLocked records a request in flight so shutdown can wait for or
// cancel it; the caller holds s.mu and calls end when it is done.
func (s *server) beginLocked(method string, ctx context.Context) *inflightCall {
	c := &inflightCall{parent: ctx, stop: s.stop}
	if s.readerConn != nil {
		c.conn = s.readerConn(method, ctx)
	}
	s.inflight++
	return c
}

// end records the request's end.
func (s *server) end(c *inflightCall) {
	c.finish()
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// idleLocked is a channel closed when no request is in flight (at once
// when none is); the caller holds s.mu.
func (s *server) idleLocked() <-chan struct{} {
	if s.idle == nil {
		s.idle = make(chan struct{})
		if s.inflight == 0 {
			close(s.idle)
			s.idle = nil
			return closedChan
		}
	}
	return s.idle
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// wireError maps a handler's error onto what crosses: a *protocol.Error
// keeps its code and message, except internal, which crosses bare; the
// request's own cancellation stays the
// context's error (the transport answers it as cancelled); anything else
// is internal, its detail logged here only.
func (s *server) wireError(ctx context.Context, method string, err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Code == protocol.CodeInternal {
			// Internal is unauthored wherever it arose (a host call that
			// failed so, a wrapped failure): its text stays in this log.
			s.logf("%s: %v", method, err)
			return protocol.NewError(protocol.CodeInternal, "internal error")
		}
		if pe == err {
			return pe
		}
		return &protocol.Error{Code: pe.Code, Message: err.Error(), ResetAt: pe.ResetAt}
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	s.logf("%s: %v", method, err)
	return protocol.NewError(protocol.CodeInternal, "internal error")
}

func (s *server) initialize(ctx context.Context, params any) (any, error) {
	p, err := protocol.DecodeParams[protocol.InitializeParams](params)
	if err != nil {
		return nil, err
	}
	var ours []protocol.Version
	for _, v := range s.manifest.Protocol {
		if protocol.Supported(v) {
			ours = append(ours, v)
		}
	}
	v, err := protocol.Negotiate(ours, p.ProtocolVersions)
	if err != nil {
		return nil, err
	}
	if s.ext.Initialize != nil {
		if err := s.ext.Initialize(ctx, p); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if s.state == stateNew {
		s.state = stateReady
	}
	s.mu.Unlock()
	return protocol.InitializeResult{ProtocolVersion: v, Manifest: json.RawMessage(s.ext.Manifest)}, nil
}

func (s *server) configure(ctx context.Context, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
	if p.KV.Stored > p.KV.Declared {
		return protocol.ConfigureResult{}, protocol.Errorf(protocol.CodeKVDowngrade,
			"the stored KV layout is version %d, newer than this release's %d", p.KV.Stored, p.KV.Declared)
	}
	if p.KV.Stored < p.KV.Declared && s.ext.Migrate != nil {
		if err := s.ext.Migrate(ctx, s.host, p.KV.Stored, p.KV.Declared); err != nil {
			return protocol.ConfigureResult{}, fmt.Errorf("migrating KV from version %d to %d: %w", p.KV.Stored, p.KV.Declared, err)
		}
	}
	if s.ext.Configure == nil {
		return protocol.ConfigureResult{}, nil
	}
	return s.ext.Configure(ctx, s.host, p)
}

// shutdown stops taking requests, runs the extension's Shutdown, then
// waits for the requests in flight, cancelling them after the grace period
// or when its own context ends. seq is shutdown's place on the stream: the
// requests read before it are in flight too, though their handlers may
// not have started yet, so it first waits for each of them to arrive.
func (s *server) shutdown(ctx context.Context, seq uint64) (any, error) {
	s.mu.Lock()
	s.state = stateShutdown
	s.shutdownSeq = seq
	for seq != 0 && s.arrivals.upTo < seq-1 {
		// Every request before shutdown's was handed to a handler that
		// is starting now; none waits for anything before arriving.
		arrived := s.arrivals.wait()
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
	var hookErr error
	if s.ext.Shutdown != nil {
		hookErr = s.ext.Shutdown(ctx, s.host)
	}
	grace := s.ext.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for {
		s.mu.Lock()
		n, idle := s.inflight, s.idleLocked()
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-idle:
		case <-timer.C:
			s.cancelInflight()
		case <-ctx.Done():
			s.cancelInflight()
			<-idle
		}
	}
	if hookErr != nil {
		return nil, hookErr
	}
	return protocol.Empty{}, nil
}

// cancelInflight ends the contexts of the requests in flight. None
// begins after it: shutdown calls it once every request read before it
// has begun, and refuses the rest.
func (s *server) cancelInflight() { s.cancelStop() }

// readable prepares an Event for a decision handler: a current or foreign
// payload passes as it is, an older version of the extension's own is
// upcast to the current version, and anything else is not passed (ok is
// false, reason says why).
func (s *server) readable(ev *protocol.Event) (ok bool, reason string, err error) {
	status := s.manifest.PayloadStatus(ev.Schema)
	switch status {
	case protocol.Foreign, protocol.Current:
		return true, "", nil
	case protocol.Upcast:
	default:
		return false, fmt.Sprintf("payload schema %q is %s for this release; not passed to the handler", ev.Schema, status), nil
	}
	base, v, _ := protocol.ParseSchema(ev.Schema)
	versions := s.schemaVersions(base)
	current := versions[len(versions)-1]
	payload := ev.Payload
	for ; v < current; v++ {
		from := protocol.SchemaID(base, v)
		if payload, err = s.ext.Upcasters[from](payload); err != nil {
			return false, "", protocol.Errorf(protocol.CodeInvalid, "upcasting event %s from %s: %v", ev.ID, from, err)
		}
	}
	ev.Schema, ev.Payload = protocol.SchemaID(base, current), payload
	return true, "", nil
}

func (s *server) schemaVersions(base string) []int {
	i := slices.IndexFunc(s.manifest.Provides.Schemas, func(d protocol.SchemaDecl) bool { return d.Base == base })
	return s.manifest.Provides.Schemas[i].Versions
}
