package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// The package checks drive a whole extension package over the wire, as
// certification does: a supervised process the driver starts against a
// fresh store, spare processes with nothing sent yet, and the recorded wire.
// Each CheckX returns nil when the package keeps the rule, the failures
// joined otherwise, and an error wrapping ErrNotApplicable when the package
// offers nothing the check can observe.

// ErrNotApplicable marks a package check that found nothing to check in what
// the package declares; certification reports it as a skip, never a pass.
var ErrNotApplicable = errors.New("not applicable")

// notApplicable returns an error wrapping ErrNotApplicable.
func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotApplicable}, args...)...)
}

// wireAtError is a failure seen at one line of the driver's Wire.
type wireAtError struct {
	index int
	err   error
}

func (e *wireAtError) Error() string { return e.err.Error() }
func (e *wireAtError) Unwrap() error { return e.err }

// atWire marks err as seen at line index of the driver's Wire.
func atWire(index int, err error) error { return &wireAtError{index: index, err: err} }

// WireIndex is the line of the driver's Wire (from 0) at which the first
// failure in err that names one was seen: the stray line, the write made
// again, the call made while deciding. A report shows the wire around it.
func WireIndex(err error) (int, bool) {
	var w *wireAtError
	if errors.As(err, &w) {
		return w.index, true
	}
	return 0, false
}

// WireLine is one line of a package's wire as the driver recorded it.
type WireLine struct {
	// Time is when the line was written or read.
	Time time.Time
	// FromExtension is true for a line the package wrote to its stdout.
	FromExtension bool
	// Line is the line without its newline.
	Line []byte
}

// WireLog collects the wire lines of every instance of a package, for a
// driver's Wire. It is safe for concurrent use; the zero value is ready.
type WireLog struct {
	mu      sync.Mutex
	all     []WireLine
	changed chan struct{} // closed by the next Add
}

// Add records one line (its newline trimmed; a blank line is dropped).
func (l *WireLog) Add(fromExtension bool, line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	l.mu.Lock()
	l.all = append(l.all, WireLine{Time: time.Now(), FromExtension: fromExtension, Line: bytes.Clone(line)})
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.mu.Unlock()
}

// Changed returns a channel closed when the next line is recorded: take it
// before reading Lines, so no line slips between the two.
func (l *WireLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// Lines returns a copy of the lines recorded so far, in order.
func (l *WireLog) Lines() []WireLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]WireLine(nil), l.all...)
}

// PackageDriver presents one extension package under test. Its process is
// supervised by a host bound to the package's manifest, configured with
// ConfigureParams against a fresh store, and restarted after a crash.
type PackageDriver interface {
	// Manifest is the manifest in the package directory.
	Manifest() *protocol.Manifest
	// InitializeParams is what the host sends in initialize, offering
	// every protocol version it speaks.
	InitializeParams() protocol.InitializeParams
	// ConfigureParams is the configuration generation the host sends.
	ConfigureParams() protocol.ConfigureParams
	// Call makes one host-to-extension call on the supervised process,
	// waiting for it to run.
	Call(ctx context.Context, method string, params, result any) error
	// Wire is every line recorded so far, on every process of the
	// package (supervised and spare), oldest first.
	Wire() []WireLine
	// WireChanged returns a channel closed when the next line is recorded
	// (WireLog.Changed), so a check waits for a line without polling.
	WireChanged() <-chan struct{}
	// Generation counts the supervised process's completed handshakes.
	Generation() uint64
	// Kill ends the supervised process with SIGKILL, as a crash would; the
	// host then restarts it.
	Kill() error
	// Restart replaces the supervised process with a fresh one, after a
	// check left it stuck in a call it never answered.
	Restart(ctx context.Context) error
	// Spawn starts a spare process of the package with nothing sent to it
	// yet. The check kills it when done.
	Spawn(ctx context.Context) (RawPackage, error)
	// OpenRun opens an executor run with the host, so the package may
	// persist its recovery metadata; recovery returns what it persisted
	// last.
	OpenRun(workID, executionID string) (runID string, recovery func() json.RawMessage)
}

// RawPackage is a spare process of a package, spoken to directly.
type RawPackage interface {
	// Call makes one call; error responses decode to *protocol.Error.
	Call(ctx context.Context, method string, params, result any) error
	// Notify sends one notification.
	Notify(ctx context.Context, method string, params any) error
	// CloseStdin closes the process's stdin.
	CloseStdin() error
	// Exited is closed once the process has exited.
	Exited() <-chan struct{}
	// Kill ends the process with SIGKILL and reaps it.
	Kill() error
	// Intercept puts f in front of the host's service for every call the
	// process makes to the host from now until restore is called
	// (CallbackGate implements it).
	Intercept(f CallbackInterceptor) (restore func())
}

// Bounds of the package checks.
var (
	// PackageExitBound is how long a package may take to exit after
	// shutdown or the end of its stdin (the host's shutdown grace).
	PackageExitBound = 5 * time.Second
	// PackageRestartBound is how long the host may take to restart a
	// killed package.
	PackageRestartBound = 15 * time.Second
)

// ---- wire analysis ----

// wireMessage is one decoded wire line.
type wireMessage struct {
	index         int
	time          time.Time
	fromExtension bool
	json          bool
	line          []byte
	ID            json.RawMessage `json:"id"`
	Method        string          `json:"method"`
	Params        json.RawMessage `json:"params"`
	Result        json.RawMessage `json:"result"`
	Error         *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// request reports whether m is a request (it has a method and an id).
func (m wireMessage) request() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// errorCode is the protocol code of an error response.
func (m wireMessage) errorCode() protocol.Code {
	if m.Error == nil {
		return ""
	}
	return protocol.DecodeWireError(m.Error.Code, m.Error.Message, m.Error.Data).Code
}

func decodeWire(lines []WireLine, from int) []wireMessage {
	out := make([]wireMessage, 0, max(0, len(lines)-from))
	for i := from; i < len(lines); i++ {
		l := lines[i]
		m := wireMessage{index: i, time: l.Time, fromExtension: l.FromExtension, line: l.Line}
		trimmed := bytes.TrimSpace(l.Line)
		if len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &m) == nil {
			m.json = true
		}
		out = append(out, m)
	}
	return out
}

// callbacks are the requests the package made to the host in msgs.
func callbacks(msgs []wireMessage) []wireMessage {
	var out []wireMessage
	for _, m := range msgs {
		if m.fromExtension && m.json && m.request() {
			out = append(out, m)
		}
	}
	return out
}

// describeCallbacks names each callback with its params, cut short.
func describeCallbacks(cbs []wireMessage) string {
	var parts []string
	for _, c := range cbs {
		parts = append(parts, fmt.Sprintf("%s %s", c.Method, clip(string(c.Params), 160)))
	}
	return strings.Join(parts, "; ")
}

// writes are the callbacks that change the store: KV writes, emissions,
// accepted Events and deliveries.
func writes(cbs []wireMessage) []wireMessage {
	var out []wireMessage
	for _, c := range cbs {
		switch c.Method {
		case "kv.commit":
			var p protocol.KVCommitParams
			if json.Unmarshal(c.Params, &p) == nil && len(p.Puts) == 0 && len(p.Deletes) == 0 && len(p.Emissions) == 0 {
				continue // a precondition-only check writes nothing
			}
			out = append(out, c)
		case "event.accept", "ingress.deliver", "timer.arm", "timer.cancel", "work.cancel":
			out = append(out, c)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// timedCall is one call with what the wire recorded while it ran.
type timedCall struct {
	err     error
	elapsed time.Duration
	during  []wireMessage
}

// observe makes one call on the supervised process and returns the wire
// lines recorded while it was outstanding.
func observe(ctx context.Context, d PackageDriver, method string, params, result any) timedCall {
	from := len(d.Wire())
	start := time.Now()
	err := d.Call(ctx, method, params, result)
	elapsed := time.Since(start)
	return timedCall{err: err, elapsed: elapsed, during: decodeWire(d.Wire(), from)}
}

// ---- what a package declares ----

// scope is the test scope of the configuration.
func scope(d PackageDriver) string {
	p := d.ConfigureParams()
	for _, e := range p.Entries {
		if e.ScopeID != "" {
			return e.ScopeID
		}
	}
	return "certify"
}

func families(m *protocol.Manifest) []string {
	var out []string
	for _, e := range m.Provides.Extensions {
		for _, f := range e.Families {
			out = append(out, f.Name)
		}
	}
	return out
}

// syntheticEvents are accepted-looking Events of each declared family in
// the test scope. Certification knows no payload schema's shape, so their
// payloads carry no schema label: a payload labelled with a schema
// matches it, and only the author (InputsFile) or the package's own
// samples give one.
func syntheticEvents(d PackageDriver) []protocol.Event {
	m := d.Manifest()
	var out []protocol.Event
	for i, f := range families(m) {
		delivery := fmt.Sprintf("certify-%d", i+1)
		id := protocol.EmittedEventID(m.Name, delivery)
		out = append(out, protocol.Event{ID: id, Sequence: int64(i + 1), ScopeID: scope(d), Source: m.Name,
			DeliveryID: delivery, Family: f, Payload: syntheticPayload(delivery),
			Root: id, OccurredAt: certifyNow, AcceptedAt: certifyNow})
	}
	return out
}

// routeInputEvents are the author's Events for a route handler
// (InputsFile), as the host would hold them.
func routeInputEvents(d PackageDriver, handler string) []protocol.Event {
	in := authorInputs(d)
	if in == nil {
		return nil
	}
	m := d.Manifest()
	var out []protocol.Event
	for i, e := range in.Routes[handler] {
		delivery := fmt.Sprintf("certify-input-%s-%d", handler, i+1)
		id := protocol.EmittedEventID(m.Name, delivery)
		out = append(out, protocol.Event{ID: id, Sequence: int64(200 + i), ScopeID: scope(d), Source: m.Name,
			DeliveryID: delivery, Family: e.Family, Type: e.Type, Schema: e.Schema, Payload: e.Payload,
			Root: id, OccurredAt: certifyNow, AcceptedAt: certifyNow})
	}
	return out
}

// syntheticPayload is an unlabelled payload in the shape most note-like
// families read: an id, a title and a text.
func syntheticPayload(id string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"id": id, "title": "A payload from certification", "text": "certification", "tags": []string{}})
	return raw
}

// deliveries are the deliveries certification pushes to a source of an
// ingress type: the author's, or one synthetic delivery.
func deliveries(d PackageDriver, typ string) []protocol.Delivery {
	m := d.Manifest()
	if in := authorInputs(d); in != nil && len(in.Ingress[typ]) > 0 {
		var out []protocol.Delivery
		for i, x := range in.Ingress[typ] {
			path := x.Path
			if path == "" {
				path = "/" + m.Name
			}
			out = append(out, protocol.Delivery{ID: fmt.Sprintf("certify-delivery-%d", i+1), Path: path, Headers: x.Headers,
				Body: x.Body, ReceivedAt: certifyNow})
		}
		return out
	}
	return []protocol.Delivery{{ID: "certify-delivery-1", Path: "/" + m.Name, Body: syntheticPayload("certify-delivery-1"), ReceivedAt: certifyNow}}
}

// registeredSources are the ingress sources the package registered at its
// last configure on the wire.
func registeredSources(d PackageDriver) []protocol.SourceDecl {
	var out []protocol.SourceDecl
	pending := map[string]bool{}
	for _, m := range decodeWire(d.Wire(), 0) {
		switch {
		case !m.json:
		case !m.fromExtension && m.request():
			pending[string(m.ID)] = m.Method == "configure"
		case m.fromExtension && !m.request() && pending[string(m.ID)] && len(m.Result) > 0:
			var res protocol.ConfigureResult
			if json.Unmarshal(m.Result, &res) == nil {
				out = res.Sources
			}
		}
	}
	return out
}

// certifyNow is the host clock the checks run on: fixed, and in the past,
// so a package that reads its own clock where it must take the host's is
// seen.
var certifyNow = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// eventOf turns a sample's draft into the Event the host would hold.
func eventOf(d PackageDriver, draft protocol.EventDraft, seq int64) protocol.Event {
	id := protocol.EmittedEventID(draft.Source, draft.DeliveryID)
	scopeID := draft.ScopeID
	if scopeID == "" {
		scopeID = scope(d)
	}
	occurred := draft.OccurredAt
	if occurred.IsZero() {
		occurred = certifyNow
	}
	return protocol.Event{ID: id, Sequence: seq, ScopeID: scopeID, Source: draft.Source, DeliveryID: draft.DeliveryID,
		Family: draft.Family, Type: draft.Type, Schema: draft.Schema, Payload: draft.Payload, Root: id,
		Works: draft.Works, OccurredAt: occurred, AcceptedAt: certifyNow}
}

// operationRequest is the request that calls operation o with input.
func operationRequest(d PackageDriver, o protocol.OperationDecl, requestID string, input json.RawMessage) (string, any) {
	switch o.Kind {
	case protocol.OperationKindWait:
		return "operation.wait", protocol.OperationWaitParams{Operation: o.Name, RequestID: requestID, Input: input, Authority: authority(d)}
	case protocol.OperationKindEmit:
		return "operation.emit", protocol.OperationEmitParams{Operation: o.Name, RequestID: requestID, Input: input, Authority: authority(d)}
	}
	return "operation.call", protocol.OperationCallParams{Operation: o.Name, RequestID: requestID, Input: input, Authority: authority(d)}
}

// authority is the test scope's authority for an operation call.
func authority(d PackageDriver) protocol.Authority { return protocol.Authority{ScopeID: scope(d)} }

// serving reports whether err is an answer from a serving package: a
// result or an error response, not a broken connection or a timeout.
func serving(err error) bool {
	if err == nil {
		return true
	}
	var perr *protocol.Error
	return errors.As(err, &perr) && !errors.Is(err, context.DeadlineExceeded)
}

// exercise drives every surface the manifest declares once, so the wire
// shows how the package behaves: configure again, each task, each check,
// each route's samples and a match of each sample and synthetic Event,
// each handler operation twice with one request ID, each wait and emit
// operation's plan, each recurrence and trigger. The package's answers are
// not judged here.
func exercise(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	call := func(method string, params any) {
		if ctx.Err() == nil {
			_ = d.Call(ctx, method, params, nil)
		}
	}
	call("configure", d.ConfigureParams())
	for _, t := range m.Provides.Tasks {
		call("task.run", protocol.TaskRunParams{Task: t.Name, Now: certifyNow})
	}
	for _, c := range m.Provides.Checks {
		call("check.run", protocol.CheckRunParams{Check: c.Name})
	}
	for _, r := range m.Provides.Routes {
		events := append(syntheticEvents(d), routeInputEvents(d, r.Handler)...)
		if r.Samples {
			var res protocol.RouteSamplesResult
			if err := d.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: r.Handler, ScopeID: scope(d), Now: certifyNow}, &res); err == nil {
				for i, s := range res.Samples {
					events = append(events, eventOf(d, s.Event, int64(100+i)))
				}
			}
		}
		for _, e := range events {
			call("route.match", protocol.RouteMatchParams{Handler: r.Handler, ScopeID: scope(d), Event: e})
		}
	}
	for _, o := range m.Provides.Operations {
		for i, in := range operationInputs(d, o) {
			method, params := operationRequest(d, o, fmt.Sprintf("certify-exercise-%s-%d", o.Name, i), in)
			call(method, params)
			if o.Kind == protocol.OperationKindHandler {
				call(method, params) // a retry, as the toolbelt makes one
			}
		}
	}
	// In-transaction calls last, under their deadline as the host makes
	// them; a package stuck in one is replaced, so the next check finds it
	// serving.
	for _, c := range inTxCalls(ctx, d) {
		if ctx.Err() != nil {
			break
		}
		tctx, cancel := context.WithTimeout(ctx, protocol.InTransactionDeadline)
		err := d.Call(tctx, c.method, c.params, c.result)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if err := d.Restart(ctx); err != nil {
				return fmt.Errorf("restarting the package after %s missed its deadline: %w", c.method, err)
			}
		}
	}
	return ctx.Err()
}

func recurrenceParams(d PackageDriver, name string) protocol.RecurrenceNextParams {
	return protocol.RecurrenceNextParams{Recurrence: name, Now: certifyNow,
		Timer: protocol.Timer{Key: "certify/" + name, ScopeID: scope(d), Due: certifyNow, Recurrence: name}}
}

func triggerParams(d PackageDriver, kind string) protocol.WorkKindTriggerParams {
	return protocol.WorkKindTriggerParams{Kind: kind, Inputs: append([]protocol.Event{}, syntheticEvents(d)...),
		Work: protocol.Work{ID: "work-certify-" + kind, ScopeID: scope(d), Kind: kind, State: "open", Revision: 1,
			CreatedAt: certifyNow, UpdatedAt: certifyNow}}
}

// waitExit waits up to bound for the process to exit.
func waitExit(ctx context.Context, p RawPackage, bound time.Duration) bool {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-p.Exited():
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// handshake runs initialize and configure on a spare process.
func handshake(ctx context.Context, d PackageDriver, p RawPackage) error {
	var res protocol.InitializeResult
	if err := p.Call(ctx, "initialize", d.InitializeParams(), &res); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := p.Call(ctx, "configure", d.ConfigureParams(), nil); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	return nil
}

// highestCommon is the highest version both lists hold, 0 for none.
func highestCommon(a, b []protocol.Version) protocol.Version {
	var best protocol.Version
	for _, v := range a {
		if slices.Contains(b, v) && v > best {
			best = v
		}
	}
	return best
}
