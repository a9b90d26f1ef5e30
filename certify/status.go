package certify

import (
	"errors"
	"fmt"
)

// Status is how a criterion ended. Every criterion that was selected ends in
// exactly one of them.
type Status string

// The statuses.
const (
	// StatusPass: the package kept every rule the criterion checks.
	StatusPass Status = "pass"
	// StatusFail: the package broke a rule, crashed, hung or timed out.
	StatusFail Status = "fail"
	// StatusSkip: the criterion does not apply to what the manifest
	// declares. The result says why. A skip never counts as a pass.
	StatusSkip Status = "skip"
	// StatusHarnessError: the runner itself broke (a panic in a suite, a
	// temporary directory it could not make, a suite not wired). It is
	// never blamed on the package, and never counts as a pass either.
	StatusHarnessError Status = "harness_error"
	// StatusNotRun: the criterion never ran because what it needs did not
	// load (the manifest). Its cause is reported once, in manifest/valid;
	// a criterion not run is neither passed nor failed.
	StatusNotRun Status = "not_run"
)

// Statuses lists every status in report order.
func Statuses() []Status {
	return []Status{StatusPass, StatusFail, StatusSkip, StatusHarnessError, StatusNotRun}
}

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPass, StatusFail, StatusSkip, StatusHarnessError, StatusNotRun:
		return true
	}
	return false
}

// Word is the status as a progress line starts with it.
func (s Status) Word() string {
	switch s {
	case StatusPass:
		return "PASS"
	case StatusFail:
		return "FAIL"
	case StatusSkip:
		return "SKIP"
	case StatusHarnessError:
		return "ERROR"
	case StatusNotRun:
		return "NOT RUN"
	}
	return "?"
}

// BaselineStatus says how a result relates to the baseline.
type BaselineStatus string

// The baseline statuses. A result whose criterion the baseline does not
// list has none ("").
const (
	// BaselineKnownFailure: the criterion failed and the baseline lists
	// it, so the failure does not fail the run.
	BaselineKnownFailure BaselineStatus = "known_failure"
	// BaselineStale: the baseline lists the criterion but it did not fail
	// (it passed, or no longer applies). The run fails until the entry is
	// removed.
	BaselineStale BaselineStatus = "stale"
	// BaselineListed: the baseline lists the criterion, but the harness
	// broke while checking it or it never ran, so nothing is known; a
	// harness error still counts.
	BaselineListed BaselineStatus = "listed"
)

// ErrHarness marks an error as the runner's own: a criterion whose Run
// returns an error wrapping it ends as harness_error, not fail.
var ErrHarness = errors.New("harness error")

// ErrNotWired is the harness error of a criterion whose conformance suite
// is not wired into the runner yet. Errors that match it match ErrHarness.
var ErrNotWired = errors.New("not wired")

// ErrUsage marks a usage error: a bad flag, pattern or baseline.
var ErrUsage = errors.New("usage")

// Harnessf returns an error that ends a criterion as harness_error. It
// wraps the %w arguments of format, if any.
func Harnessf(format string, args ...any) error {
	return &harnessError{err: fmt.Errorf(format, args...)}
}

// harnessError is the runner's own error: its message is the cause's, and it
// matches ErrHarness (and ErrNotWired when notWired is set).
type harnessError struct {
	err      error
	notWired bool
}

func (e *harnessError) Error() string { return e.err.Error() }
func (e *harnessError) Unwrap() error { return e.err }
func (e *harnessError) Is(target error) bool {
	return target == ErrHarness || (e.notWired && target == ErrNotWired)
}

// usagef returns an error matching ErrUsage with the given message.
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

type usageError struct{ err error }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == ErrUsage }
