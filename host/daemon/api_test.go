package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// apiTestHandler routes Events of type "opened" into Work keyed by their
// payload's item, with a display; an Event of type "huge" matches with a
// display over the limits (so routing records display_refused).
type apiTestHandler struct{}

func (apiTestHandler) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	var p struct {
		Item string `json:"item"`
	}
	_ = json.Unmarshal(in.Event.Payload, &p)
	switch in.Event.Type {
	case "opened":
		return runtime.RouteDecision{Match: true, Reason: "an opened item", CorrelationKeys: []string{"item:" + p.Item},
			Display: &runtime.Display{Title: "Item " + p.Item, Ref: "#" + p.Item}}, nil
	case "huge":
		return runtime.RouteDecision{Match: true, Reason: "huge", CorrelationKeys: []string{"huge:" + p.Item},
			Display: &runtime.Display{Title: strings.Repeat("x", runtime.MaxDisplayTitle+1)}}, nil
	}
	return runtime.RouteDecision{Reason: "not an opened item"}, nil
}

func (apiTestHandler) Samples(_ context.Context, scopeID string, _ runtime.Route, _ time.Time) ([]runtime.RouteSample, error) {
	return []runtime.RouteSample{{ID: "opened", Title: "an item is opened", Event: runtime.Envelope{
		Source: "tester", DeliveryID: "sample-1", ScopeID: scopeID, Family: "items", Type: "opened",
		Payload: json.RawMessage(`{"item":"99"}`)}}}, nil
}

// apiTestBackend is a small real backend: a SQLite store in a temporary
// directory and an engine over it, with a configuration it only stores.
type apiTestBackend struct {
	store  notifyingStore
	engine *runtime.Engine

	// shutdown shuts the test's API server down.
	shutdown func(context.Context) error

	mu       sync.Mutex
	patterns map[string]bool // the route patterns served, by "METHOD /path"
	config   json.RawMessage
	gen      client.Generation
}

func (b *apiTestBackend) Store() runtime.Store    { return b.store }
func (b *apiTestBackend) Engine() *runtime.Engine { return b.engine }
func (b *apiTestBackend) Logger() *slog.Logger    { return slog.New(slog.DiscardHandler) }
func (b *apiTestBackend) Changed() <-chan struct{} {
	return b.store.Changed()
}

func (b *apiTestBackend) Status(context.Context) client.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return client.Status{DaemonVersion: "test", Generation: b.gen, Ready: b.gen.Number > 0,
		Packages: []client.Package{{Name: "tester", Version: "1.0.0", State: "ready", Origin: client.OriginBundled}}}
}

func (b *apiTestBackend) Config() (json.RawMessage, client.Generation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.config, b.gen
}

// ValidateConfig wants an object with a "scopes" array; a scope "bad" is
// refused by path.
func (b *apiTestBackend) ValidateConfig(_ context.Context, doc []byte) []client.Diagnostic {
	var cfg struct {
		Scopes []string `json:"scopes"`
	}
	if err := json.Unmarshal(doc, &cfg); err != nil {
		return []client.Diagnostic{{Path: "$", Rule: "json", Message: err.Error()}}
	}
	var diags []client.Diagnostic
	for i, s := range cfg.Scopes {
		if s == "bad" {
			diags = append(diags, client.Diagnostic{Path: fmt.Sprintf("$.scopes[%d]", i), Rule: "scope_id", Message: "bad scope"})
		}
	}
	return diags
}

// ValidateConfigWarnings warns about a scope "old"; it refuses what
// ValidateConfig refuses.
func (b *apiTestBackend) ValidateConfigWarnings(ctx context.Context, doc []byte) (diags, warnings []client.Diagnostic) {
	if strings.Contains(string(doc), `"old"`) {
		warnings = []client.Diagnostic{{Path: "$.scopes", Rule: RulePackageWarning, Message: "scope old is deprecated"}}
	}
	return b.ValidateConfig(ctx, doc), warnings
}

func (b *apiTestBackend) ApplyConfig(ctx context.Context, doc []byte) (client.Generation, []client.Diagnostic, error) {
	if diags := b.ValidateConfig(ctx, doc); len(diags) > 0 {
		return client.Generation{}, diags, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.config = append(json.RawMessage(nil), doc...)
	b.gen = client.Generation{Number: b.gen.Number + 1, Hash: "sha256:test", AppliedAt: time.Now().UTC()}
	return b.gen, nil, nil
}

func (b *apiTestBackend) served(pattern string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.patterns == nil {
		b.patterns = map[string]bool{}
	}
	b.patterns[pattern] = true
}

var _ apiBackend = (*apiTestBackend)(nil)

const apiScope = "scope-a"

// newAPITest serves the API of a fresh backend on a unix socket in a short
// temporary directory and returns the backend and a client of it.
func newAPITest(t testing.TB) (*apiTestBackend, *client.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := sqlite.Open(filepath.Join(dir, "state"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	store := newNotifyingStore(s)
	eng, err := runtime.New(runtime.Config{Store: store,
		Routes:   map[string][]runtime.Route{apiScope: {{Name: "items", Handler: "items", Kind: "item"}}},
		Handlers: map[string]runtime.RouteHandler{"items": apiTestHandler{}}})
	require.NoError(t, err)
	t.Cleanup(eng.Close)
	require.NoError(t, store.Transact(t.Context(), func(tx runtime.Tx) error {
		for _, id := range []string{apiScope, "scope-b"} {
			if _, err := tx.PutScope(runtime.Scope{ID: id, Name: "Scope " + id}); err != nil {
				return err
			}
		}
		return nil
	}))
	b := &apiTestBackend{store: store, engine: eng}

	sock := filepath.Join(dir, client.SocketName)
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	handler := newAPI(b)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := handler.mux.Handler(r)
		b.served(pattern) // before serving: a stream returns late
		handler.ServeHTTP(w, r)
	})}
	b.shutdown = srv.Shutdown
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	c := client.New(sock)
	t.Cleanup(func() {
		c.Close()
		srv.Close()
		<-served
	})
	return b, c
}

// accept accepts an Event of typ about item into scope and routes it.
func (b *apiTestBackend) accept(t testing.TB, scope, delivery, typ, item string) runtime.Event {
	t.Helper()
	evs, err := b.engine.Accept(context.Background(), runtime.Envelope{Source: "tester", DeliveryID: delivery, ScopeID: scope,
		Family: "items", Type: typ, Payload: json.RawMessage(fmt.Sprintf(`{"item":%q}`, item))})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	return evs[0]
}

func (b *apiTestBackend) route(t testing.TB) {
	t.Helper()
	_, err := b.engine.RoutePending(context.Background())
	require.NoError(t, err)
}

func TestAPIStatusAndReadiness(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "test", st.DaemonVersion)
	assert.False(t, st.Ready)
	require.Len(t, st.Packages, 1)
	assert.Equal(t, "tester", st.Packages[0].Name)

	_, err = c.Ready(ctx)
	assert.ErrorIs(t, err, client.ErrUnavailable, "not ready before a generation is configured")

	_, _, err = b.ApplyConfig(ctx, []byte(`{"scopes":["scope-a"]}`))
	require.NoError(t, err)
	r, err := c.Ready(ctx)
	require.NoError(t, err)
	assert.True(t, r.Ready)
	assert.Equal(t, int64(1), r.Generation.Number)

	scopes, err := c.Scopes(ctx)
	require.NoError(t, err)
	require.Len(t, scopes, 2)
	assert.Equal(t, apiScope, scopes[0].ID)
}

func TestAPIEventsPageByScopeAndCursor(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	for i := range 5 {
		b.accept(t, apiScope, fmt.Sprintf("a%d", i), "noise", "")
	}
	for i := range 2 {
		b.accept(t, "scope-b", fmt.Sprintf("b%d", i), "noise", "")
	}
	var seen []string
	q := client.EventQuery{Scope: apiScope, Limit: 2}
	for range 10 {
		page, err := c.Events(ctx, q)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(page.Events), 2)
		for _, e := range page.Events {
			assert.Equal(t, apiScope, e.ScopeID)
			seen = append(seen, e.DeliveryID)
		}
		if page.Next == 0 {
			break
		}
		q.After = page.Next
	}
	assert.Equal(t, []string{"a0", "a1", "a2", "a3", "a4"}, seen, "pages of a scope, in order, none lost or repeated")

	all, err := c.Events(ctx, client.EventQuery{})
	require.NoError(t, err)
	assert.Len(t, all.Events, 7, "no scope reads the whole log")
	assert.Zero(t, all.Next, "a short page has no next cursor")
}

func TestAPIEventWithItsRouteRecord(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	opened := b.accept(t, apiScope, "d1", "opened", "7")
	huge := b.accept(t, apiScope, "d2", "huge", "8")
	pending := b.accept(t, "scope-b", "d3", "opened", "9")

	d, err := c.Event(ctx, pending.ID)
	require.NoError(t, err)
	assert.Nil(t, d.Route, "an Event not routed yet has no route record")

	b.route(t)
	d, err = c.Event(ctx, opened.ID)
	require.NoError(t, err)
	assert.Equal(t, opened.Sequence, d.Event.Sequence)
	require.NotNil(t, d.Route)
	assert.Equal(t, runtime.DispositionCreated, d.Route.Disposition)
	assert.Equal(t, "items", d.Route.Handler)
	assert.Equal(t, "an opened item", d.Route.Reason, "the record says why it matched")
	assert.NotEmpty(t, d.Route.WorkID)
	assert.Empty(t, d.Route.DisplayRefused)

	d, err = c.Event(ctx, huge.ID)
	require.NoError(t, err)
	require.NotNil(t, d.Route)
	assert.Contains(t, d.Route.DisplayRefused, "title", "a display over the limits is refused, and the record says why")

	d, err = c.Event(ctx, pending.ID)
	require.NoError(t, err)
	require.NotNil(t, d.Route)
	assert.Equal(t, runtime.DispositionUnmatched, d.Route.Disposition, "scope-b has no routes")

	_, err = c.Event(ctx, "ev_missing")
	assert.ErrorIs(t, err, client.ErrNotFound)
}

func TestAPIWorkWithDisplayWaitsAndCancel(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	b.accept(t, apiScope, "d1", "opened", "7")
	b.accept(t, apiScope, "d2", "opened", "8")
	b.route(t)

	page, err := c.Works(ctx, client.WorkQuery{Scope: apiScope, State: client.WorkPending})
	require.NoError(t, err)
	require.Len(t, page.Works, 2)
	none, err := c.Works(ctx, client.WorkQuery{Scope: "scope-b"})
	require.NoError(t, err)
	assert.Empty(t, none.Works)
	_, err = c.Works(ctx, client.WorkQuery{State: "sleeping"})
	assert.ErrorIs(t, err, client.ErrInvalidRequest)

	id := page.Works[0].ID
	d, err := c.Work(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, d.Work.Display)
	assert.True(t, strings.HasPrefix(d.Work.Display.Title, "Item "))
	assert.Nil(t, d.Wait)
	assert.Empty(t, d.Executions)

	due := time.Hour
	_, err = b.engine.DeclareWait(ctx, id, "tester", runtime.WaitRequest{Keys: []string{"review:1"}, Description: "waiting for a review", Timeout: due})
	require.NoError(t, err)
	require.NoError(t, b.engine.SetWaitProgress(ctx, id, "tester", "1 of 2 approvals"))
	waits, err := c.Waits(ctx, client.WaitQuery{Scope: apiScope})
	require.NoError(t, err)
	require.Len(t, waits.Waits, 1)
	wt := waits.Waits[0]
	assert.Equal(t, id, wt.WorkID)
	assert.Equal(t, apiScope, wt.ScopeID)
	assert.Equal(t, "waiting for a review", wt.Description)
	assert.Equal(t, "1 of 2 approvals", wt.Progress)
	assert.False(t, wt.Due.IsZero(), "a Wait with a timeout has a due time")
	other, err := c.Waits(ctx, client.WaitQuery{Scope: "scope-b"})
	require.NoError(t, err)
	assert.Empty(t, other.Waits)
	d, err = c.Work(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, d.Wait)
	assert.Equal(t, wt.ID, d.Wait.ID)

	xs, err := c.Executions(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, xs)
	_, err = c.Executions(ctx, "wk_missing")
	assert.ErrorIs(t, err, client.ErrNotFound)

	w, err := c.CancelWork(ctx, id, "operator")
	require.NoError(t, err)
	assert.Equal(t, client.WorkCancelled, w.State)
	_, err = c.CancelWork(ctx, id, "")
	assert.ErrorIs(t, err, client.ErrConflict, "a Work that ended cannot be cancelled again")
	_, err = c.CancelWork(ctx, "wk_missing", "")
	assert.ErrorIs(t, err, client.ErrNotFound)
	waits, err = c.Waits(ctx, client.WaitQuery{})
	require.NoError(t, err)
	assert.Empty(t, waits.Waits, "cancelling a Work cancels its Wait")
}

// storeDigest is everything a trace could write: the log, the change log,
// the Work and the routing namespace.
func storeDigest(t *testing.T, s runtime.Store) string {
	t.Helper()
	var sb strings.Builder
	require.NoError(t, s.View(t.Context(), func(tx runtime.ReadTx) error {
		seq, err := tx.LatestSequence()
		if err != nil {
			return err
		}
		ch, err := tx.LatestChange()
		if err != nil {
			return err
		}
		works, err := tx.Works(runtime.WorkFilter{Limit: runtime.MaxPageLimit})
		if err != nil {
			return err
		}
		kv, err := tx.KVList(runtime.NamespaceRouting, "", "", runtime.MaxPageLimit)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "seq=%d changes=%d works=%d", seq, ch, len(works))
		for _, w := range works {
			fmt.Fprintf(&sb, " %s@%d", w.ID, w.Revision)
		}
		for _, e := range kv {
			fmt.Fprintf(&sb, " %s=%s", e.Key, e.Version)
		}
		return nil
	}))
	return sb.String()
}

func TestAPIRouteTraceWritesNothing(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	b.accept(t, apiScope, "d1", "opened", "7")
	b.route(t)
	before := storeDigest(t, b.store)

	res, err := c.Trace(ctx, apiScope, client.TraceRequest{Event: &client.TraceEvent{Source: "tester", Family: "items", Type: "opened",
		Payload: json.RawMessage(`{"item":"42"}`)}})
	require.NoError(t, err)
	assert.Equal(t, 0, res.Chosen)
	require.Len(t, res.Steps, 1)
	assert.True(t, res.Steps[0].Match)
	assert.True(t, res.Steps[0].Chosen)
	assert.Equal(t, []string{"item:42"}, res.Steps[0].CorrelationKeys)
	require.NotNil(t, res.Steps[0].Display)
	assert.Equal(t, "Item 42", res.Steps[0].Display.Title)

	samples, err := c.Samples(ctx, apiScope)
	require.NoError(t, err)
	require.Len(t, samples, 1)
	assert.Equal(t, "opened", samples[0].ID)
	res, err = c.Trace(ctx, apiScope, client.TraceRequest{Sample: "opened"})
	require.NoError(t, err)
	assert.Equal(t, "99", strings.TrimPrefix(res.Steps[0].Display.Ref, "#"))

	res, err = c.Trace(ctx, apiScope, client.TraceRequest{Event: &client.TraceEvent{Source: "tester", Type: "other"}})
	require.NoError(t, err)
	assert.Equal(t, -1, res.Chosen, "no route matches")
	assert.Equal(t, "not an opened item", res.Steps[0].Reason)

	assert.Equal(t, before, storeDigest(t, b.store), "a route trace writes nothing")

	_, err = c.Trace(ctx, apiScope, client.TraceRequest{Sample: "missing"})
	assert.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.Trace(ctx, "scope-missing", client.TraceRequest{Sample: "opened"})
	assert.ErrorIs(t, err, client.ErrNotFound)
	assert.Equal(t, before, storeDigest(t, b.store))
}

func TestAPIConfigValidateAndApply(t *testing.T) {
	_, c := newAPITest(t)
	ctx := t.Context()
	res, err := c.ValidateConfig(ctx, []byte(`{"scopes":["ok","bad"]}`))
	require.NoError(t, err)
	assert.False(t, res.Valid)
	assert.Equal(t, []client.Diagnostic{{Path: "$.scopes[1]", Rule: "scope_id", Message: "bad scope"}}, res.Diagnostics)

	gen, err := c.ApplyConfig(ctx, []byte(`{"scopes":["ok"]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(1), gen.Number)

	_, err = c.ApplyConfig(ctx, []byte(`{"scopes":["bad","bad"]}`))
	require.ErrorIs(t, err, client.ErrConfigInvalid)
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Len(t, apiErr.Diagnostics, 2, "every diagnostic crosses, not just the first")

	view, err := c.Config(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), view.Generation.Number, "a refused config leaves the running generation")
	assert.JSONEq(t, `{"scopes":["ok"]}`, string(view.Config))
}

func TestAPIChangeStreamWakesAWaiterAndResumes(t *testing.T) {
	b, c := newAPITest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b.accept(t, apiScope, "d1", "opened", "7")
	b.route(t)

	// Everything so far is in the durable log: a stream from 0 replays it.
	stream, err := c.Changes(ctx, client.ChangeQuery{})
	require.NoError(t, err)
	first, err := stream.Next()
	require.NoError(t, err)
	assert.Equal(t, client.ChangeEvent, first.Kind)
	require.NotNil(t, first.Event)
	assert.Equal(t, "d1", first.Event.DeliveryID)
	second, err := stream.Next()
	require.NoError(t, err)
	assert.Equal(t, client.ChangeWork, second.Kind)
	require.NotNil(t, second.Work)
	assert.Equal(t, client.WorkPending, second.Work.State)
	workID := second.Work.ID
	require.NoError(t, stream.Close())

	// A waiter blocks on the stream until the Work is cancelled; the
	// cancel happens after it opened the stream (it reads the log first,
	// then waits for news).
	type result struct {
		ch  client.Change
		err error
	}
	woke := make(chan result, 1)
	opened := make(chan struct{})
	go func() {
		s, err := c.Changes(ctx, client.ChangeQuery{After: second.Seq})
		close(opened)
		if err != nil {
			woke <- result{err: err}
			return
		}
		defer s.Close()
		for {
			ch, err := s.Next()
			if err != nil || (ch.Work != nil && ch.Work.State == client.WorkCancelled) {
				woke <- result{ch, err}
				return
			}
		}
	}()
	<-opened
	_, err = c.CancelWork(ctx, workID, "")
	require.NoError(t, err)
	r := <-woke
	require.NoError(t, r.err)
	assert.Equal(t, workID, r.ch.Work.ID)
	assert.Greater(t, r.ch.Seq, second.Seq)

	// Resuming after the first change misses nothing: the second comes next.
	stream, err = c.Changes(ctx, client.ChangeQuery{After: first.Seq})
	require.NoError(t, err)
	again, err := stream.Next()
	require.NoError(t, err)
	assert.Equal(t, second.Seq, again.Seq)
	require.NoError(t, stream.Close())

	// WaitFor over a scope that never sees a change ends with ctx.
	short, stop := context.WithCancel(ctx)
	stop()
	_, err = c.WaitFor(short, client.ChangeQuery{Scope: "scope-b"}, func(client.Change) bool { return true })
	assert.ErrorIs(t, err, context.Canceled)

	// WaitFor a condition already in the log returns at once.
	ch, err := c.WaitFor(ctx, client.ChangeQuery{Scope: apiScope}, func(ch client.Change) bool {
		return ch.Work != nil && ch.Work.State == client.WorkCancelled
	})
	require.NoError(t, err)
	assert.Equal(t, r.ch.Seq, ch.Seq)
}

func TestAPIChangeStreamResumesFromLastEventID(t *testing.T) {
	b, c := newAPITest(t)
	b.accept(t, apiScope, "d1", "noise", "")
	b.accept(t, apiScope, "d2", "noise", "")
	// The standard SSE reconnect header is honoured like ?after=.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Socket())
	}}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://x/v1/changes", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(buf[:n]), "id: 2\nevent: event\ndata: "), "got %q", buf[:n])

	_, err = c.Changes(t.Context(), client.ChangeQuery{After: 99})
	assert.ErrorIs(t, err, client.ErrConflict, "a cursor beyond the log is refused, not waited on forever")
}

func TestAPIShutdownEndsChangeStreams(t *testing.T) {
	b, c := newAPITest(t)
	stream, err := c.Changes(t.Context(), client.ChangeQuery{})
	require.NoError(t, err)
	defer stream.Close()
	// Shutdown waits for handlers; a stream must end on its own.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, b.shutdown(ctx), "a shutdown does not wait for a streaming client")
	_, err = stream.Next()
	assert.ErrorIs(t, err, io.EOF, "the stream ends cleanly; the client resumes elsewhere")
}

// TestClientCoversEveryRoute calls every method of the client and checks
// that together they reach every route of the table: a route added
// without its client method fails here.
func TestClientCoversEveryRoute(t *testing.T) {
	b, c := newAPITest(t)
	ctx := t.Context()
	ev := b.accept(t, apiScope, "d1", "opened", "7")
	b.route(t)
	_, _, err := b.ApplyConfig(ctx, []byte(`{"scopes":[]}`))
	require.NoError(t, err)
	page, err := c.Works(ctx, client.WorkQuery{})
	require.NoError(t, err)
	require.NotEmpty(t, page.Works)
	work := page.Works[0].ID

	calls := []func() error{
		func() error { _, err := c.Status(ctx); return err },
		func() error { _, err := c.Ready(ctx); return err },
		func() error { _, err := c.Scopes(ctx); return err },
		func() error { _, err := c.Samples(ctx, apiScope); return err },
		func() error { _, err := c.Trace(ctx, apiScope, client.TraceRequest{Sample: "opened"}); return err },
		func() error { _, err := c.Reconcile(ctx, "nope"); return ignore(err, client.ErrNotFound) },
		func() error { _, err := c.Events(ctx, client.EventQuery{}); return err },
		func() error { _, err := c.Event(ctx, ev.ID); return err },
		func() error { _, err := c.Works(ctx, client.WorkQuery{}); return err },
		func() error { _, err := c.Work(ctx, work); return err },
		func() error { _, err := c.Executions(ctx, work); return err },
		func() error { _, err := c.Waits(ctx, client.WaitQuery{}); return err },
		func() error { _, err := c.Config(ctx); return err },
		func() error { _, err := c.ValidateConfig(ctx, []byte(`{}`)); return err },
		func() error { _, err := c.ApplyConfig(ctx, []byte(`{}`)); return err },
		func() error { _, err := c.CancelWork(ctx, work, "covered"); return err },
		func() error { _, err := c.Doctor(ctx, true); return err },
		func() error { _, err := c.ReloadPackages(ctx, nil); return ignore(err, client.ErrUnavailable) },
		func() error { _, err := c.KVLayouts(ctx); return ignore(err, client.ErrUnavailable) },
		func() error {
			_, err := c.KV(ctx, client.KVQuery{Package: "nope"})
			return ignore(err, client.ErrNotFound)
		},
		func() error { return ignore(c.InjectFault(ctx, "nope", "close-stdout"), client.ErrNotFound) },
		func() error { _, err := c.Faults(ctx, "nope"); return ignore(err, client.ErrNotFound) },
		func() error { return ignore(c.ClearFaults(ctx, "nope"), client.ErrNotFound) },
		func() error { _, err := c.Clock(ctx); return err },
		func() error { _, err := c.AdvanceClock(ctx, time.Second); return err },
		func() error {
			_, err := c.WaitFor(ctx, client.ChangeQuery{}, func(client.Change) bool { return true })
			return err
		},
	}
	for i, call := range calls {
		require.NoError(t, call(), "call %d", i)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rt := range apiRoutes {
		assert.True(t, b.patterns[rt.method+" "+rt.pattern], "no client method reaches %s %s", rt.method, rt.pattern)
	}
}

func ignore(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return err
}

// TestConfigViewRedactsSecretReferences: what GET /v1/config serves names
// a connection's secrets but never the text of their references.
func TestConfigViewRedactsSecretReferences(t *testing.T) {
	d := &Daemon{current: &Config{Connections: []ConnectionConfig{{Name: "gh", Type: "github",
		SecretRefs: map[string]string{"token": "env:GITHUB_TOKEN", "key": "file:/etc/secret/key"}}}}}
	doc, _ := d.Config()
	assert.NotContains(t, string(doc), "GITHUB_TOKEN")
	assert.NotContains(t, string(doc), "/etc/secret/key")
	assert.NotContains(t, string(doc), "env:")
	assert.Contains(t, string(doc), `"token"`, "the secret's name stays")
}
