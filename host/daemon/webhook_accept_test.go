package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
