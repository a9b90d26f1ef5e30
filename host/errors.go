package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// runtimeErrors is the one table from the runtime's sentinels onto the
// protocol's: what an extension sees when the store or the engine refuses
// its call. A test walks it.
var runtimeErrors = []struct {
	from error
	to   *protocol.Error
}{
	{runtime.ErrNotFound, protocol.ErrNotFound},
	{runtime.ErrConflict, protocol.ErrConflict},
	{runtime.ErrInvalid, protocol.ErrInvalid},
	{runtime.ErrTooLarge, protocol.ErrInvalid},
	{runtime.ErrCausalLimit, protocol.ErrCausalLimit},
	{runtime.ErrUnauthorized, protocol.ErrUnauthorized},
	{runtime.ErrUnsupported, protocol.ErrUnsupported},
	{runtime.ErrNotAdoptable, protocol.ErrNotAdoptable},
	{context.Canceled, protocol.ErrCancelled},
	{context.DeadlineExceeded, protocol.ErrCancelled},
}

// RuntimeErrorTable lists the mapping, for tests and documentation.
func RuntimeErrorTable() [][2]error {
	out := make([][2]error, len(runtimeErrors))
	for i, e := range runtimeErrors {
		out[i] = [2]error{e.from, e.to}
	}
	return out
}

// wireError turns an error of the host's into what crosses to the
// extension: a *protocol.Error as it is, a runtime sentinel as its
// protocol code with the message, anything else internal with no detail
// (the detail stays in the host's log).
func wireError(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if error(pe) == err {
			return pe
		}
		// Keep the context the host added ("emission 1: …").
		return &protocol.Error{Code: pe.Code, Message: err.Error(), ResetAt: pe.ResetAt}
	}
	for _, m := range runtimeErrors {
		if errors.Is(err, m.from) {
			return protocol.NewError(m.to.Code, err.Error())
		}
	}
	return protocol.NewError(protocol.CodeInternal, "internal error")
}

// protocolToRuntime is the reverse mapping, for what an extension answers
// the engine through the adapters.
func protocolToRuntime(err error) error {
	if err == nil {
		return nil
	}
	for _, m := range runtimeErrors {
		if m.from == context.DeadlineExceeded {
			continue
		}
		if errors.Is(err, m.to) {
			return fmt.Errorf("%w: %w", m.from, err)
		}
	}
	return err
}
