package sdk

import (
	"context"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
)

// SecretCache holds one named secret of each connection a package resolves
// through the host (a webhook's signing secret or token), for one config
// generation: the first request of a generation resolves it, the others
// cost no secret.resolve, and Reset (from configure) drops them all, so a
// rotated secret takes effect with the generation that brings it. The zero
// value is not ready: set Name. It is safe for concurrent use.
type SecretCache struct {
	// Name is the secret's name in its connection ("secret", "token").
	Name string
	// Resolve, when set, resolves in place of Host.SecretResolve: a
	// package that retries a refusal wraps the call here.
	Resolve func(ctx context.Context, host *Host, p protocol.SecretResolveParams) (map[string]string, error)

	mu     sync.Mutex
	values map[string][]byte // by connection
}

// Get returns the secret of connection, resolved for scopeID on the first
// call of the generation. A refusal, or a connection without the secret or
// with it empty (not_found), is answered as it is and cached nothing: the
// next call asks the host again.
func (c *SecretCache) Get(ctx context.Context, host *Host, scopeID, connection string) ([]byte, error) {
	c.mu.Lock()
	s, ok := c.values[connection]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	resolve := c.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host *Host, p protocol.SecretResolveParams) (map[string]string, error) {
			return host.SecretResolve(ctx, p)
		}
	}
	values, err := resolve(ctx, host, protocol.SecretResolveParams{Connection: connection, ScopeID: scopeID, Names: []string{c.Name}})
	if err != nil {
		return nil, err
	}
	s = []byte(values[c.Name])
	if len(s) == 0 {
		return nil, protocol.Errorf(protocol.CodeNotFound, "connection %q has an empty %s", connection, c.Name)
	}
	c.mu.Lock()
	if c.values == nil {
		c.values = map[string][]byte{}
	}
	c.values[connection] = s
	c.mu.Unlock()
	return s, nil
}

// Reset drops every cached secret: a new generation resolves them again.
func (c *SecretCache) Reset() {
	c.mu.Lock()
	c.values = nil
	c.mu.Unlock()
}
