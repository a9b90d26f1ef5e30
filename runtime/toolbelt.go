package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// OperationError is an operation's own refusal (bad input, a rule of its
// domain). Unlike other handler errors it is an answer: it is committed
// under the request ID and replayed like a result.
type OperationError struct {
	Code    string
	Message string
}

func (e *OperationError) Error() string { return e.Code + ": " + e.Message }

// Call runs a toolbelt operation for an execution. The handler runs
// outside any transaction; its answer (result, or an *OperationError) is
// then committed under requestID with whatever the operation declared (a
// Wait, emissions and their records) in one transaction. A retry with the
// same request ID replays the committed answer without calling the
// handler. If the call ends after the handler's effect and before that
// commit, nothing is committed and the retry runs the handler again, which
// is why a handler must be idempotent on the request ID. A call without a
// request ID is never replayed. auth must come from Engine.Authority for
// the calling execution, never from the caller's own word.
func (e *Engine) Call(ctx context.Context, auth Authority, operation, requestID string, input json.RawMessage) (json.RawMessage, error) {
	spec, ok := e.conf().Operations[operation]
	if !ok {
		return nil, fmt.Errorf("%w: unknown operation %q", ErrNotFound, operation)
	}
	if !slices.Contains(auth.Operations, operation) {
		return nil, fmt.Errorf("%w: operation %q is not granted", ErrUnauthorized, operation)
	}
	if requestID != "" {
		if err := ValidateIdentifier("request id", requestID); err != nil {
			return nil, err
		}
		var stored ToolResult
		err := e.store.View(ctx, func(r ReadTx) error {
			var err error
			stored, err = r.ToolResult(requestID)
			return err
		})
		switch {
		case err == nil:
			return replay(stored, operation)
		case !isNotFound(err):
			return nil, err
		}
	}
	call := Call{Operation: operation, RequestID: requestID, Authority: auth, Input: input}

	var (
		result json.RawMessage
		opErr  *OperationError
		apply  func(tx Tx) error
	)
	switch op := spec.Operation.(type) {
	case WaitOperation:
		req, res, err := op.PlanWait(ctx, call)
		if !errors.As(err, &opErr) && err != nil {
			return nil, err
		}
		result = res
		if opErr == nil {
			apply = func(tx Tx) error {
				_, err := e.declareWait(tx, auth.WorkID, spec.Owner.Name, req)
				return err
			}
		}
	case EmitOperation:
		plan, err := op.PlanEmit(ctx, call)
		if !errors.As(err, &opErr) && err != nil {
			return nil, err
		}
		result = plan.Result
		if opErr == nil {
			apply = func(tx Tx) error {
				_, err := e.emit(tx, spec.Owner, KVBatch{}, plan.Emissions, plan.Commit)
				return err
			}
		}
	default:
		res, err := op.Handle(ctx, call)
		if !errors.As(err, &opErr) && err != nil {
			return nil, err
		}
		result = res
	}
	if opErr != nil {
		result = nil
	}
	tr := ToolResult{RequestID: requestID, Operation: operation, Result: result}
	if opErr != nil {
		tr.ErrorCode, tr.ErrorMessage = opErr.Code, opErr.Message
	}
	err := e.store.Transact(ctx, func(tx Tx) error {
		if requestID != "" {
			stored, added, err := tx.PutToolResult(tr)
			if err != nil {
				return err
			}
			if !added {
				tr = stored // a concurrent retry committed first: its answer stands
				return nil
			}
		}
		if apply != nil {
			return apply(tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if apply != nil {
		e.Kick()
	}
	return replay(tr, operation)
}

// replay turns a committed answer back into the call's return values.
func replay(tr ToolResult, operation string) (json.RawMessage, error) {
	if tr.Operation != operation {
		return nil, fmt.Errorf("%w: request id %q was used for operation %q", ErrConflict, tr.RequestID, tr.Operation)
	}
	if tr.ErrorCode != "" {
		return nil, &OperationError{Code: tr.ErrorCode, Message: tr.ErrorMessage}
	}
	return tr.Result, nil
}
