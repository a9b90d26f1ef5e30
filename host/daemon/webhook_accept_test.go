package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// failingStore fails every write transaction while fail is set.
type failingStore struct {
	runtime.Store
	mu      sync.Mutex
	fail    bool
	commits int
}

var errDiskFull = errors.New("disk full")

func (s *failingStore) Transact(ctx context.Context, fn func(runtime.Tx) error) error {
	s.mu.Lock()
	fail := s.fail
	s.commits++
	s.mu.Unlock()
	if fail {
		return errDiskFull
	}
	return s.Store.Transact(ctx, fn)
}

func newAcceptTest(t testing.TB) (*failingStore, *runtime.Engine) {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := sqlite.Open(filepath.Join(dir, "state"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	fs := &failingStore{Store: s}
	eng, err := runtime.New(runtime.Config{Store: fs})
	require.NoError(t, err)
	t.Cleanup(eng.Close)
	return fs, eng
}

func env(id, payload string) runtime.Envelope {
	return runtime.Envelope{Source: "notes/team/inbox", DeliveryID: id, ScopeID: "team", Family: "notes.note",
		Type: "note", Payload: json.RawMessage(payload)}
}

func countEvents(t *testing.T, s runtime.Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.View(t.Context(), func(r runtime.ReadTx) error {
		evs, err := r.Events(0, 1000)
		n = len(evs)
		return err
	}))
	return n
}

// Deliveries that arrive together share one commit; when one of a group
// is refused, the others are still accepted, each all or none.
func TestGroupAcceptorSharesACommitAndIsolatesARefusal(t *testing.T) {
	s, eng := newAcceptTest(t)
	g := &groupAcceptor{store: s, engine: eng}
	_, err := eng.Accept(t.Context(), env("taken", `{"v":1}`))
	require.NoError(t, err)
	before := s.commits

	mk := func(envs ...runtime.Envelope) *delivery {
		return &delivery{envs: envs, done: make(chan struct{})}
	}
	ok1, ok2 := mk(env("a", `{}`), env("b", `{}`)), mk(env("c", `{}`))
	g.commit([]*delivery{ok1, ok2})
	require.NoError(t, ok1.err)
	require.NoError(t, ok2.err)
	assert.Len(t, ok1.events, 2)
	assert.Equal(t, before+1, s.commits, "one commit for the group")

	// "taken" with other content is a conflict: its delivery (with "d")
	// is refused whole, its neighbours accepted.
	left, bad, right := mk(env("e", `{}`)), mk(env("d", `{}`), env("taken", `{"v":2}`)), mk(env("f", `{}`))
	g.commit([]*delivery{left, bad, right})
	assert.NoError(t, left.err)
	assert.ErrorIs(t, bad.err, runtime.ErrConflict)
	assert.Empty(t, bad.events)
	assert.NoError(t, right.err)
	assert.Equal(t, 1+3+2, countEvents(t, s), `"d" was not accepted`)
}

// A store failure fails every delivery of the group and accepts nothing.
func TestGroupAcceptorStoreFailure(t *testing.T) {
	s, eng := newAcceptTest(t)
	g := newGroupAcceptor(s, eng)
	defer g.close()
	s.mu.Lock()
	s.fail = true
	s.mu.Unlock()
	_, err := g.accept(t.Context(), []runtime.Envelope{env("a", `{}`)})
	assert.ErrorIs(t, err, errDiskFull)
	s.mu.Lock()
	s.fail = false
	s.mu.Unlock()
	assert.Equal(t, 0, countEvents(t, s))
	evs, err := g.accept(t.Context(), []runtime.Envelope{env("a", `{}`)})
	require.NoError(t, err)
	assert.Len(t, evs, 1)
}

// A closed acceptor refuses new deliveries and leaves none waiting.
func TestGroupAcceptorClosed(t *testing.T) {
	s, eng := newAcceptTest(t)
	g := newGroupAcceptor(s, eng)
	_, err := g.accept(t.Context(), []runtime.Envelope{env("a", `{}`)})
	require.NoError(t, err)
	g.close()
	g.close()
	_, err = g.accept(t.Context(), []runtime.Envelope{env("b", `{}`)})
	assert.ErrorIs(t, err, errAcceptorClosed)
	assert.Equal(t, 1, countEvents(t, s))
}

// Every way a delivery can fail has its answer: the package's refusals
// 4xx with its reason, everything else 5xx (nothing was accepted, so the
// sender retries).
func TestWebhookFailureAnswers(t *testing.T) {
	for _, c := range []struct {
		name   string
		ctxErr error
		err    error
		status int
		code   string
	}{
		{"a bad signature", nil, protocol.NewError(protocol.CodeUnauthorized, "bad signature"), 401, "unauthorized"},
		{"a malformed body", nil, protocol.NewError(protocol.CodeInvalid, "delivery body"), 400, "invalid"},
		{"bad params", nil, protocol.NewError(protocol.CodeInvalidParams, "x"), 400, "invalid_params"},
		{"not the package's path", nil, protocol.NewError(protocol.CodeNotFound, "x"), 404, "not_found"},
		{"a conflict", nil, protocol.NewError(protocol.CodeConflict, "x"), 409, "conflict"},
		{"a causal limit", nil, protocol.NewError(protocol.CodeCausalLimit, "x"), 429, "causal_limit"},
		{"an overloaded package", nil, protocol.NewError(protocol.CodeOverloaded, "x"), 503, "overloaded"},
		{"a package shutting down", nil, protocol.NewError(protocol.CodeShuttingDown, "x"), 503, "shutting_down"},
		{"an internal error", nil, protocol.NewError(protocol.CodeInternal, "x"), 502, "package_failed"},
		{"a crash", nil, errors.New("jsonrpc: connection ended"), 502, "package_failed"},
		{"a refused answer", nil, fmt.Errorf("%w: event 0", host.ErrWebhookAnswer), 502, "bad_answer"},
		{"the deadline", context.DeadlineExceeded, context.DeadlineExceeded, 504, "timeout"},
	} {
		status, code, msg := handleRefusal(c.ctxErr, c.err, "notes")
		assert.Equal(t, c.status, status, c.name)
		assert.Equal(t, c.code, code, c.name)
		assert.NotEmpty(t, msg, c.name)
	}
	assert.NotContains(t, func() string { _, _, m := handleRefusal(nil, errors.New("secret detail"), "notes"); return m }(), "secret detail",
		"a failure's detail is logged, not sent")

	for _, c := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"a conflict", fmt.Errorf("envelope 0: %w", runtime.ErrConflict), 409, "conflict"},
		{"an invalid envelope", fmt.Errorf("envelope 0: %w", runtime.ErrInvalid), 502, "bad_answer"},
		{"a causal limit", runtime.ErrCausalLimit, 502, "bad_answer"},
		{"a store failure", errDiskFull, 500, "store_failed"},
		{"the deadline", context.DeadlineExceeded, 504, "timeout"},
	} {
		status, code, _ := acceptRefusal(c.err)
		assert.Equal(t, c.status, status, c.name)
		assert.Equal(t, c.code, code, c.name)
	}
}
