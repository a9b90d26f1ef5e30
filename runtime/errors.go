package runtime

import "errors"

// Sentinel errors of the Store contract. Implementations wrap them with
// context (fmt.Errorf("%w: ...")), so callers test with errors.Is.
var (
	// ErrNotFound: no such record.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a revision, identity, precondition or lease fence failed.
	// Nothing the failing operation would have written was written.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input breaks a documented rule. Nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrTooLarge: a value is over its documented limit. Nothing was written.
	ErrTooLarge = errors.New("too large")
)
