package host

import (
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/protocol"
)

// ErrValidateRefused wraps the extension's refusal of a config object
// (an answer coded invalid); its message is the extension's.
var ErrValidateRefused = errors.New("refused by the extension")

// Validate asks the extension to check one config object before a
// configuration is applied. A refusal (an answer coded invalid) returns
// an error wrapping ErrValidateRefused with the extension's message; a
// package that does not serve validate (method_not_found, an older SDK)
// accepts the object; any other failure (the process down, a timeout) is
// returned as it is, and the caller refuses the object with it.
func (r *Remote) Validate(ctx context.Context, p protocol.ValidateParams) (protocol.ValidateResult, error) {
	var res protocol.ValidateResult
	err := r.conn.Call(ctx, "validate", p, &res)
	switch code := protocol.CodeOf(err); {
	case err == nil:
		return res, nil
	case code == protocol.CodeMethodNotFound:
		return protocol.ValidateResult{}, nil
	case code == protocol.CodeInvalid:
		var pe *protocol.Error
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		return protocol.ValidateResult{}, &validateRefusal{msg: msg}
	default:
		return protocol.ValidateResult{}, err
	}
}

type validateRefusal struct{ msg string }

func (e *validateRefusal) Error() string { return e.msg }
func (e *validateRefusal) Unwrap() error { return ErrValidateRefused }
