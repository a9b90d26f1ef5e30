package sdk

import (
	"bytes"
	"context"
	"time"
)

// SetMaxInflight sets the bound on requests served at once for the
// connections ServeConn starts from now on, and returns a function that
// restores it. Transcripts use a small bound to stay short.
func SetMaxInflight(n int) (restore func()) {
	old := maxInflight
	maxInflight = n
	return func() { maxInflight = old }
}

// SetBeforeServe makes ServeConn call f as each request's handler starts,
// before the request is counted or served, and returns a function that
// restores the default (nothing).
func SetBeforeServe(f func(method string)) (restore func()) {
	beforeServe = f
	return func() { beforeServe = nil }
}

// SetAfterServe makes ServeConn call f as each request's handler returns,
// before its answer is written, and returns a function that restores the
// default (nothing).
func SetAfterServe(f func(method string)) (restore func()) {
	afterServe = f
	return func() { afterServe = nil }
}

// SetEagerServing sets which requests the connections ServeConn starts
// from now on start on the reader: "none" (every request handed to a
// goroutine), "all", or "pure" (the default: the PureFunc methods).
func SetEagerServing(which string) (restore func()) {
	old := eagerServing
	switch which {
	case "none":
		eagerServing = nil
	case "all":
		eagerServing = func(string) bool { return true }
	default:
		eagerServing = servedEager
	}
	return func() { eagerServing = old }
}

// SetEagerDeadline sets the EagerDeadline the connections ServeConn starts
// from now on pass to the transport (zero: its default).
func SetEagerDeadline(d time.Duration) (restore func()) {
	old := eagerDeadline
	eagerDeadline = d
	return func() { eagerDeadline = old }
}

// SetReuseParams sets the ReuseParams option the connections ServeConn
// starts from now on pass to the transport.
func SetReuseParams(on bool) (restore func()) {
	old := reuseParams
	reuseParams = on
	return func() { reuseParams = old }
}

// SetReleaseOnDone sets whether the connections ServeConn starts from now
// on pass the reading on when an Eager handler asks for its context's Done
// channel.
func SetReleaseOnDone(on bool) (restore func()) {
	old := releaseOnDone
	releaseOnDone = on
	return func() { releaseOnDone = old }
}

// SetInlinePure sets whether the connections ServeConn starts from now on
// have the reader serve a Pure operation's calls itself (Inline); off,
// they start on the reader as a Handler's do (Eager).
func SetInlinePure(on bool) (restore func()) {
	old := inlinePure
	inlinePure = on
	return func() { inlinePure = old }
}

// ServedInline is what ServeConn's Inline predicate says of a request to
// ext, for the benchmark of its cost.
func ServedInline(ext *Extension) (func(method string, params []byte) bool, error) {
	s, err := newServer(ext, CallerFunc(func(context.Context, string, any, any) error { return nil }))
	if err != nil {
		return nil, err
	}
	return func(method string, params []byte) bool { return s.servedInline(method, params) }, nil
}

// SetFirstOperationName makes the connections ServeConn starts from now on
// decide what to serve Inline by the first "operation" member the params
// hold, whatever else they hold, as a naive scan would.
func SetFirstOperationName() (restore func()) {
	old := operationCallName
	operationCallName = func(params []byte) ([]byte, bool) {
		const member = `"operation":"`
		i := bytes.Index(params, []byte(member))
		if i < 0 {
			return nil, false
		}
		rest := params[i+len(member):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil, false
		}
		return rest[:j], true
	}
	return func() { operationCallName = old }
}
