package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
)

// apiBackend is what the management API needs from the daemon. *Daemon
// implements it; the API reads the store through its indexed reads and asks
// the engine for routing answers, and never writes except through the
// engine (cancel) or the backend (config apply).
type apiBackend interface {
	// Store is the daemon's store, as the engine uses it.
	Store() runtime.Store
	// Engine is the engine in force (the same one across hot applies, or
	// the current one if an apply swaps it).
	Engine() *runtime.Engine
	// Status is the daemon's status now.
	Status(ctx context.Context) client.Status
	// Config is the running configuration with every secret reference
	// replaced by a placeholder, and its generation.
	Config() (redacted json.RawMessage, gen client.Generation)
	// ValidateConfig checks doc whole; nil means valid.
	ValidateConfig(ctx context.Context, doc []byte) []client.Diagnostic
	// ValidateConfigWarnings checks doc as ValidateConfig does and also
	// returns the packages' warnings about objects they accepted.
	ValidateConfigWarnings(ctx context.Context, doc []byte) (diags, warnings []client.Diagnostic)
	// ApplyConfig validates doc and, when it is valid, applies it as a new
	// generation. A refused doc returns its diagnostics (and no error), and
	// the running generation keeps serving.
	ApplyConfig(ctx context.Context, doc []byte) (client.Generation, []client.Diagnostic, error)
	// Changed returns a channel closed at the next commit to the store
	// after the call (see changeNotifier), so the change stream waits for
	// news instead of polling.
	Changed() <-chan struct{}
	// Logger hears failures the API does not show its caller.
	Logger() *slog.Logger
	// Doctor runs the daemon's checks and its packages' (deep: their
	// thorough forms).
	Doctor(ctx context.Context, deep bool) client.DoctorReport
}

// Bounds of what a request may carry.
const (
	// maxConfigBody bounds a configuration document.
	maxConfigBody = 4 << 20
	// maxRequestBody bounds every other request body (a trace's Event).
	maxRequestBody = 1 << 20
	// streamPage is how many changes the stream reads per store view.
	streamPage = 200
)

// streamKeepAlive is how often an idle change stream sends a comment, so a
// client (and the server) notices a dead peer.
var streamKeepAlive = 15 * time.Second

// apiRoute is one route of the management API.
type apiRoute struct {
	method, pattern string
	// query lists the query parameters the route takes; any other is
	// refused.
	query  []string
	handle func(a *api, w http.ResponseWriter, r *http.Request) error
}

// apiRoutes is the API, one row per route: adding a route is one edit.
var apiRoutes = []apiRoute{
	{"GET", "/v1/status", nil, (*api).status},
	{"GET", "/v1/ready", nil, (*api).ready},
	{"GET", "/v1/scopes", nil, (*api).scopes},
	{"GET", "/v1/scopes/{id}/samples", nil, (*api).samples},
	{"POST", "/v1/scopes/{id}/route/trace", nil, (*api).trace},
	{"POST", "/v1/sources/{name}/reconcile", nil, (*api).reconcile},
	{"GET", "/v1/events", []string{"scope", "after", "limit"}, (*api).events},
	{"GET", "/v1/events/{id}", nil, (*api).event},
	{"GET", "/v1/work", []string{"scope", "state", "after", "limit"}, (*api).works},
	{"GET", "/v1/work/{id}", nil, (*api).work},
	{"GET", "/v1/work/{id}/executions", nil, (*api).executions},
	{"POST", "/v1/work/{id}/cancel", nil, (*api).cancel},
	{"GET", "/v1/waits", []string{"scope", "after", "limit"}, (*api).waits},
	{"GET", "/v1/config", nil, (*api).config},
	{"POST", "/v1/config/validate", nil, (*api).validateConfig},
	{"POST", "/v1/config/apply", nil, (*api).applyConfig},
	{"GET", "/v1/changes", []string{"after", "after_journal", "scope"}, (*api).changes},
	{"GET", "/v1/clock", nil, (*api).clock},
	{"POST", "/v1/clock/advance", nil, (*api).advanceClock},
	{"GET", "/v1/doctor", []string{"deep"}, (*api).doctor},
	{"POST", "/v1/faults", nil, (*api).injectFault},
	{"GET", "/v1/faults/{package}", nil, (*api).faults},
	{"DELETE", "/v1/faults/{package}", nil, (*api).clearFaults},
	{"POST", "/v1/packages/reload", nil, (*api).reloadPackages},
	{"GET", "/v1/packages/kv-layouts", nil, (*api).kvLayouts},
	{"GET", "/v1/kv", []string{"package", "namespace", "prefix", "after", "limit"}, (*api).kv},
}

// api serves the management API over one backend.
type api struct {
	b   apiBackend
	mux *http.ServeMux
	// closing ends every change stream: http.Server.Shutdown waits for
	// handlers to return and never cancels their requests, so a stream
	// must hear of a shutdown another way (see closeStreams).
	closing   chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	servers map[*http.Server]bool // the servers closeStreams is registered with
}

// ServeHTTP serves the API.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// closeStreams ends every change stream, now and later, so a server's
// Shutdown need not wait for streaming clients. A client resumes from its
// last change on the next daemon.
func (a *api) closeStreams() { a.closeOnce.Do(func() { close(a.closing) }) }

// watchShutdown registers closeStreams with the server serving r, once per
// server, so whoever serves the API gets streams that end on Shutdown.
func (a *api) watchShutdown(r *http.Request) {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.servers == nil {
		a.servers = map[*http.Server]bool{}
	}
	if !a.servers[srv] {
		a.servers[srv] = true
		srv.RegisterOnShutdown(a.closeStreams)
	}
}

// newAPI builds the management API's handler: HTTP/1.1 + JSON under /v1/,
// every refusal a {"error":{"code","message"}} body with its code's status.
func newAPI(b apiBackend) *api {
	a := &api{b: b, mux: http.NewServeMux(), closing: make(chan struct{})}
	paths := map[string]bool{}
	for _, rt := range apiRoutes {
		a.mux.HandleFunc(rt.method+" "+rt.pattern, a.wrap(rt))
		if !paths[rt.pattern] {
			paths[rt.pattern] = true
			// The same path without a method catches the other methods,
			// so they get a JSON refusal rather than the mux's text.
			a.mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
				a.fail(w, r, client.Errorf(client.CodeMethodNotAllowed, "%s is not served on %s", r.Method, rt.pattern))
			})
		}
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, client.Errorf(client.CodeNotFound, "no such route %s", clipForMessage(r.URL.Path)))
	})
	return a
}

func (a *api) wrap(rt apiRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := checkQuery(r.URL.Query(), rt.query); err != nil {
			a.fail(w, r, err)
			return
		}
		if err := rt.handle(a, w, r); err != nil {
			a.fail(w, r, err)
		}
	}
}

// fail writes err as the API's error body. Runtime sentinels map onto the
// API's codes; anything unexpected is internal, its detail only logged.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError(err)
	if e.Code == client.CodeInternal {
		a.b.Logger().Error("management API", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, e.Code.HTTPStatus(), client.ErrorBody(e))
}

// apiError maps err onto the API's error table.
func apiError(err error) *client.Error {
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Code.Valid():
		return e
	case errors.Is(err, runtime.ErrNotFound):
		return &client.Error{Code: client.CodeNotFound, Message: err.Error()}
	case errors.Is(err, runtime.ErrConflict):
		return &client.Error{Code: client.CodeConflict, Message: err.Error()}
	case errors.Is(err, runtime.ErrInvalid), errors.Is(err, runtime.ErrTooLarge):
		return &client.Error{Code: client.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &client.Error{Code: client.CodeUnavailable, Message: "the request was cancelled"}
	}
	return &client.Error{Code: client.CodeInternal, Message: "internal error; the daemon's log has the detail"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a write error means the client left
}

func ok(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

// view runs a read on the store.
func view[T any](ctx context.Context, s runtime.Store, read func(runtime.ReadTx) (T, error)) (T, error) {
	var v T
	err := s.View(ctx, func(tx runtime.ReadTx) error {
		var err error
		v, err = read(tx)
		return err
	})
	return v, err
}

// ---- status ----

func (a *api) status(w http.ResponseWriter, r *http.Request) error {
	return ok(w, a.b.Status(r.Context()))
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) error {
	st := a.b.Status(r.Context())
	if !st.Ready {
		return client.Errorf(client.CodeUnavailable, "not ready: generation %d is not configured in every package yet", st.Generation.Number)
	}
	return ok(w, client.Readiness{Ready: true, Generation: st.Generation})
}

// ---- scopes, samples, trace ----

func (a *api) scopes(w http.ResponseWriter, r *http.Request) error {
	scopes, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]runtime.Scope, error) { return tx.Scopes() })
	if err != nil {
		return err
	}
	out := client.ScopeList{Scopes: []client.Scope{}}
	for _, s := range scopes {
		out.Scopes = append(out.Scopes, client.Scope{ID: s.ID, Name: s.Name, UpdatedAt: s.UpdatedAt})
	}
	return ok(w, out)
}

// scope reads the scope named by the path, not_found if it is unknown.
func (a *api) scope(r *http.Request) (string, error) {
	id := r.PathValue("id")
	_, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) (runtime.Scope, error) { return tx.Scope(id) })
	if errors.Is(err, runtime.ErrNotFound) {
		return "", client.Errorf(client.CodeNotFound, "no scope %q", clipForMessage(id))
	}
	return id, err
}

func (a *api) samples(w http.ResponseWriter, r *http.Request) error {
	scope, err := a.scope(r)
	if err != nil {
		return err
	}
	out := client.SampleList{Samples: []client.Sample{}}
	for _, s := range a.b.Engine().RouteSamples(r.Context(), scope) {
		out.Samples = append(out.Samples, client.Sample{ID: s.ID, Title: s.Title, Event: traceEventOf(s.Event)})
	}
	return ok(w, out)
}

func (a *api) trace(w http.ResponseWriter, r *http.Request) error {
	scope, err := a.scope(r)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	req, err := parseTraceRequest(body)
	if err != nil {
		return err
	}
	eng := a.b.Engine()
	var te client.TraceEvent
	if req.Sample != "" {
		found := false
		for _, s := range eng.RouteSamples(r.Context(), scope) {
			if s.ID == req.Sample {
				te, found = traceEventOf(s.Event), true
				break
			}
		}
		if !found {
			return client.Errorf(client.CodeNotFound, "scope %q offers no sample %q", scope, clipForMessage(req.Sample))
		}
	} else {
		te = *req.Event
	}
	ev, err := traceEnvelope(scope, te)
	if err != nil {
		return err
	}
	steps, err := eng.RouteTrace(r.Context(), scope, ev)
	if err != nil {
		return err
	}
	out := client.TraceResult{Scope: scope, Event: te, Steps: []client.TraceStep{}, Chosen: -1}
	for _, st := range steps {
		ts := client.TraceStep{Route: st.Route, Handler: st.Handler, Match: st.Decision.Match, Reason: st.Decision.Reason,
			Kind: st.Decision.Kind, CorrelationKeys: st.Decision.CorrelationKeys, Display: wireDisplay(st.Decision.Display),
			Chosen: st.Chosen, DisplayRefused: st.DisplayRefused}
		if st.Err != nil {
			ts.Error = st.Err.Error()
		}
		if st.Chosen {
			out.Chosen = st.Route
		}
		out.Steps = append(out.Steps, ts)
	}
	return ok(w, out)
}

// traceEnvelope is the hypothetical Event of a trace, checked as an
// envelope would be on acceptance (and never accepted).
func traceEnvelope(scope string, te client.TraceEvent) (runtime.Event, error) {
	env := runtime.Envelope{ID: "trace", Source: te.Source, DeliveryID: te.DeliveryID, ScopeID: scope,
		Family: te.Family, Type: te.Type, Schema: te.Schema, Payload: te.Payload, Works: te.Works, OccurredAt: te.OccurredAt}
	if env.DeliveryID == "" {
		env.DeliveryID = "trace"
	}
	sig, err := runtime.ValidateEnvelope(env)
	if err != nil {
		return runtime.Event{}, client.Errorf(client.CodeInvalidRequest, "trace event: %v", err)
	}
	return runtime.Event{Envelope: env, Signature: sig, Root: env.ID}, nil
}

func traceEventOf(env runtime.Envelope) client.TraceEvent {
	return client.TraceEvent{Source: env.Source, DeliveryID: env.DeliveryID, Family: env.Family, Type: env.Type,
		Schema: env.Schema, Payload: env.Payload, Works: env.Works, OccurredAt: env.OccurredAt}
}

// ---- ingress ----

// reconcile runs one scan of a source now, as its schedule would.
func (a *api) reconcile(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	rep, err := a.b.Engine().Reconcile(r.Context(), name)
	if errors.Is(err, runtime.ErrNotFound) {
		return client.Errorf(client.CodeNotFound, "no source %q", clipForMessage(name))
	}
	if err != nil {
		return err
	}
	out := client.ReconcileResult{Source: name, Pages: rep.Pages, Observed: rep.Observed, Accepted: []client.Event{},
		Unchanged: rep.Unchanged, Complete: rep.Complete, Absent: rep.Absent}
	for _, e := range rep.Accepted {
		out.Accepted = append(out.Accepted, wireEvent(e))
	}
	return ok(w, out)
}

// ---- events ----

func (a *api) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := queryInt(q, "after")
	if err != nil {
		return err
	}
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	scope, scoped := q.Get("scope"), q.Has("scope")
	var latest int64
	page, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]runtime.Event, error) {
		var err error
		if latest, err = tx.LatestChange(); err != nil {
			return nil, err
		}
		if scoped {
			return tx.ScopeEvents(scope, after, limit)
		}
		return tx.Events(after, limit)
	})
	if err != nil {
		return err
	}
	out := client.EventPage{Events: make([]client.Event, 0, len(page)), LatestChange: latest}
	for _, e := range page {
		out.Events = append(out.Events, wireEvent(e))
	}
	if len(page) == limit {
		out.Next = page[len(page)-1].Sequence
	}
	return ok(w, out)
}

func (a *api) event(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	ev, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) (runtime.Event, error) { return tx.Event(id) })
	if errors.Is(err, runtime.ErrNotFound) {
		return client.Errorf(client.CodeNotFound, "no event %q", clipForMessage(id))
	}
	if err != nil {
		return err
	}
	out := client.EventDetail{Event: wireEvent(ev)}
	rec, err := a.b.Engine().RouteRecordOf(r.Context(), id)
	switch {
	case err == nil:
		out.Route = &client.RouteRecord{Disposition: rec.Disposition, Route: rec.Route, Handler: rec.Handler,
			Reason: rec.Reason, WorkID: rec.WorkID, Woke: rec.Woke, DisplayRefused: rec.DisplayRefused}
	case !errors.Is(err, runtime.ErrNotFound):
		return err
	}
	return ok(w, out)
}

// ---- work, waits, executions ----

func (a *api) works(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	state := runtime.WorkState(q.Get("state"))
	if state != "" && !state.Valid() {
		return client.Errorf(client.CodeInvalidRequest, "state %q is not a work state (pending, running, waiting, done, failed, cancelled)",
			clipForMessage(string(state)))
	}
	filter := runtime.WorkFilter{ScopeID: q.Get("scope"), State: state, After: q.Get("after"), Limit: limit}
	page, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]runtime.Work, error) { return tx.Works(filter) })
	if err != nil {
		return err
	}
	out := client.WorkPage{Works: make([]client.Work, 0, len(page))}
	for _, wk := range page {
		out.Works = append(out.Works, wireWork(wk))
	}
	if len(page) == limit {
		out.Next = page[len(page)-1].ID
	}
	return ok(w, out)
}

func (a *api) work(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	type detail struct {
		work runtime.Work
		wait *runtime.Wait
		xs   []runtime.Execution
	}
	d, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) (detail, error) {
		var d detail
		var err error
		if d.work, err = tx.Work(id); err != nil {
			return d, err
		}
		switch wt, err := tx.ActiveWait(id); {
		case err == nil:
			d.wait = &wt
		case !errors.Is(err, runtime.ErrNotFound):
			return d, err
		}
		d.xs, err = tx.Executions(id)
		return d, err
	})
	if errors.Is(err, runtime.ErrNotFound) {
		return client.Errorf(client.CodeNotFound, "no work %q", clipForMessage(id))
	}
	if err != nil {
		return err
	}
	out := client.WorkDetail{Work: wireWork(d.work), Executions: wireExecutions(d.xs)}
	if d.wait != nil {
		wt := wireWait(*d.wait, d.work.ScopeID)
		out.Wait = &wt
	}
	return ok(w, out)
}

func (a *api) executions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	xs, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]runtime.Execution, error) {
		if _, err := tx.Work(id); err != nil {
			return nil, err
		}
		return tx.Executions(id)
	})
	if errors.Is(err, runtime.ErrNotFound) {
		return client.Errorf(client.CodeNotFound, "no work %q", clipForMessage(id))
	}
	if err != nil {
		return err
	}
	return ok(w, client.ExecutionList{Executions: wireExecutions(xs)})
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	var req client.CancelRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	store := a.b.Store()
	wk, err := view(r.Context(), store, func(tx runtime.ReadTx) (runtime.Work, error) { return tx.Work(id) })
	if errors.Is(err, runtime.ErrNotFound) {
		return client.Errorf(client.CodeNotFound, "no work %q", clipForMessage(id))
	}
	if err != nil {
		return err
	}
	if wk.State.Terminal() {
		return client.Errorf(client.CodeConflict, "work %q has already ended (%s)", id, wk.State)
	}
	if err := a.b.Engine().CancelWork(r.Context(), id); err != nil {
		return err
	}
	// The store keeps no reason; the daemon's log does.
	a.b.Logger().Info("work cancelled through the management API", "work", id, "reason", clipForMessage(req.Reason))
	wk, err = view(r.Context(), store, func(tx runtime.ReadTx) (runtime.Work, error) { return tx.Work(id) })
	if err != nil {
		return err
	}
	return ok(w, wireWork(wk))
}

func (a *api) waits(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	scope, scoped := q.Get("scope"), q.Has("scope")
	after := q.Get("after")
	type row struct {
		wait  runtime.Wait
		scope string
	}
	var next string
	rows, err := view(r.Context(), a.b.Store(), func(tx runtime.ReadTx) ([]row, error) {
		var rows []row
		// A scope filter skips other scopes' Waits: page on until the
		// page is full or the active Waits run out.
		for len(rows) < limit {
			page, err := tx.ActiveWaits(after, limit)
			if err != nil {
				return nil, err
			}
			for _, wt := range page {
				wk, err := tx.Work(wt.WorkID)
				if err != nil && !errors.Is(err, runtime.ErrNotFound) {
					return nil, err
				}
				after = wt.WorkID
				if scoped && wk.ScopeID != scope {
					continue
				}
				rows = append(rows, row{wt, wk.ScopeID})
				if len(rows) == limit {
					next = wt.WorkID
					break
				}
			}
			if len(page) < limit {
				break
			}
		}
		return rows, nil
	})
	if err != nil {
		return err
	}
	out := client.WaitList{Waits: make([]client.Wait, 0, len(rows)), Next: next}
	for _, rw := range rows {
		out.Waits = append(out.Waits, wireWait(rw.wait, rw.scope))
	}
	return ok(w, out)
}

// ---- config ----

func (a *api) config(w http.ResponseWriter, r *http.Request) error {
	doc, gen := a.b.Config()
	if len(doc) == 0 {
		doc = json.RawMessage(`{}`)
	}
	return ok(w, client.ConfigView{Generation: gen, Config: doc})
}

func (a *api) validateConfig(w http.ResponseWriter, r *http.Request) error {
	doc, err := readBody(w, r, maxConfigBody)
	if err != nil {
		return err
	}
	diags, warnings := a.b.ValidateConfigWarnings(r.Context(), doc)
	return ok(w, client.ConfigResult{Valid: len(diags) == 0, Diagnostics: diags, Warnings: warnings})
}

func (a *api) applyConfig(w http.ResponseWriter, r *http.Request) error {
	doc, err := readBody(w, r, maxConfigBody)
	if err != nil {
		return err
	}
	gen, diags, err := a.b.ApplyConfig(r.Context(), doc)
	if len(diags) > 0 {
		return &client.Error{Code: client.CodeConfigInvalid,
			Message:     fmt.Sprintf("configuration refused with %d diagnostics; generation keeps serving", len(diags)),
			Diagnostics: diags}
	}
	if err != nil {
		return err
	}
	return ok(w, client.ConfigResult{Valid: true, Generation: &gen})
}

// ---- request parsing ----

// checkQuery refuses a parameter the route does not take, or one given
// twice.
func checkQuery(q url.Values, allowed []string) error {
	for name, vals := range q {
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return client.Errorf(client.CodeInvalidRequest, "unknown query parameter %q", clipForMessage(name))
		}
		if len(vals) > 1 {
			return client.Errorf(client.CodeInvalidRequest, "query parameter %q given %d times", name, len(vals))
		}
	}
	return nil
}

// queryInt reads a non-negative integer parameter, 0 when absent.
func queryInt(q url.Values, name string) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, client.Errorf(client.CodeInvalidRequest, "%s=%q is not a non-negative integer", name, clipForMessage(s))
	}
	return n, nil
}

// queryLimit reads the page limit: DefaultPageLimit when absent, 1 to
// MaxPageLimit otherwise.
func queryLimit(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return client.DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > client.MaxPageLimit {
		return 0, client.Errorf(client.CodeInvalidRequest, "limit=%q is not between 1 and %d", clipForMessage(s), client.MaxPageLimit)
	}
	return n, nil
}

// readBody reads the whole request body, refusing one over max.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, max)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, client.Errorf(client.CodeInvalidRequest, "request body is over %d bytes", max)
		}
		return nil, client.Errorf(client.CodeInvalidRequest, "reading the request body: %v", err)
	}
	return data, nil
}

// parseTraceRequest decodes a trace request strictly: exactly one of an
// event and a sample name.
func parseTraceRequest(body []byte) (client.TraceRequest, error) {
	var req client.TraceRequest
	if err := decodeStrict(body, &req); err != nil {
		return req, err
	}
	if (req.Event == nil) == (req.Sample == "") {
		return req, client.Errorf(client.CodeInvalidRequest, "a trace takes exactly one of \"event\" and \"sample\"")
	}
	if req.Event != nil && req.Event.Source == "" {
		return req, client.Errorf(client.CodeInvalidRequest, "a trace event needs a \"source\"")
	}
	return req, nil
}

// clipForMessage bounds what of a caller's input an error message repeats.
func clipForMessage(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
