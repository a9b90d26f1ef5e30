package sdk

import (
	"context"

	"github.com/open-conduit/open-conduit/protocol"
)

// Attach serves ext in process: it returns the Caller a host uses to call
// the extension, dispatching each call straight to ext's handlers with
// the same checks and lifecycle as Serve (initialize first, undeclared
// surfaces refused, shutting_down after shutdown), with no JSON. host is
// the Caller the extension's Host calls the host through. params may be
// wire values or JSON; result is filled as protocol.SetResult does.
//
// A call whose context ends returns the context's error, as a cancelled
// call over the wire does.
func Attach(ext *Extension, host Caller) (Caller, error) {
	s, err := newServer(ext, host)
	if err != nil {
		return nil, err
	}
	return CallerFunc(func(ctx context.Context, method string, params, result any) error {
		res, err := s.call(ctx, 0, method, params)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		return protocol.SetResult(result, res)
	}), nil
}
