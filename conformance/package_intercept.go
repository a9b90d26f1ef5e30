package conformance

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// CallbackInterceptor sees each call a spare process makes to the host
// before the host's service does. It answers the call itself (answered
// true, with its result or error) or lets the service answer it. A check
// uses it to hold a handler's host call open while it cancels the
// handler, or to refuse a batch as a concurrent write would.
type CallbackInterceptor func(ctx context.Context, method string, params json.RawMessage) (answered bool, result any, err error)

// CallbackGate puts the interceptor a check sets in front of the host's
// handler of a spare process: a driver serves its spares' calls through
// Handler and implements RawPackage.Intercept with Intercept. The zero
// value passes every call on.
type CallbackGate struct {
	mu sync.Mutex
	f  CallbackInterceptor
}

// Handler serves calls through the current interceptor, then h.
func (g *CallbackGate) Handler(h jsonrpc.Handler) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		g.mu.Lock()
		f := g.f
		g.mu.Unlock()
		if f != nil && !req.Notification {
			if answered, res, err := f(ctx, req.Method, req.Params); answered {
				return res, err
			}
		}
		return h.Handle(ctx, req)
	})
}

// Intercept sets f until restore is called.
func (g *CallbackGate) Intercept(f CallbackInterceptor) (restore func()) {
	g.mu.Lock()
	g.f = f
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.f = nil
		g.mu.Unlock()
	}
}

// holdCalls holds every call unanswered until release; a call the package
// cancels meanwhile ($/cancel) ends cancelled.
func holdCalls() (hold CallbackInterceptor, release func()) {
	released := make(chan struct{})
	var once sync.Once
	return func(ctx context.Context, method string, params json.RawMessage) (bool, any, error) {
			select {
			case <-released:
				return false, nil, nil
			case <-ctx.Done():
				return true, nil, ctx.Err()
			}
		}, func() {
			once.Do(func() { close(released) })
		}
}

// errInjectedConflict is how certification refuses a guarded batch, as the
// host does when a concurrent write changed a key the batch is
// conditioned on.
var errInjectedConflict = protocol.Errorf(protocol.CodeConflict, "a precondition no longer holds: another write changed the key first")

// conflictFirstGuarded refuses the first kv.commit with preconditions as a
// conflict, without applying it, and passes every other call on.
func conflictFirstGuarded() CallbackInterceptor {
	var mu sync.Mutex
	done := false
	return func(ctx context.Context, method string, params json.RawMessage) (bool, any, error) {
		if method != "kv.commit" {
			return false, nil, nil
		}
		var p protocol.KVCommitParams
		if json.Unmarshal(params, &p) != nil || len(p.Preconditions) == 0 {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if done {
			return false, nil, nil
		}
		done = true
		return true, nil, errInjectedConflict
	}
}
