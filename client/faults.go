package client

import (
	"context"
	"net/url"
)

// InjectFault arms one fault rule (host/faultproxy's grammar, such as
// "crash method=route.match nth=1") on the proxy between the daemon and
// the package pkg. It takes effect on the next message the rule matches,
// and holds across the package's restarts until ClearFaults. A daemon
// started without serve --test-faults refuses with ErrConflict; a bad rule
// is ErrInvalidRequest, an unknown package ErrNotFound.
func (c *Client) InjectFault(ctx context.Context, pkg, rule string) error {
	return c.do(ctx, "POST", "/v1/faults", nil, jsonBody(FaultInjection{Package: pkg, Rule: rule}), &FaultState{})
}

// ClearFaults disarms every fault rule of pkg and ends its stalls.
func (c *Client) ClearFaults(ctx context.Context, pkg string) error {
	return c.do(ctx, "DELETE", "/v1/faults/"+url.PathEscape(pkg), nil, nil, &FaultState{})
}

// Faults reads the fault rules armed on pkg, with what each has done.
func (c *Client) Faults(ctx context.Context, pkg string) (FaultState, error) {
	var out FaultState
	return out, c.do(ctx, "GET", "/v1/faults/"+url.PathEscape(pkg), nil, nil, &out)
}
