package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// UnauthoredBound is how long a request certification makes while it
// fails the package's host calls may take to be answered.
var UnauthoredBound = 10 * time.Second

// drivenRequest is one request certification makes of a surface the
// package declares, built afresh for each use.
type drivenRequest struct {
	what   string
	method string
	// params returns the request's params, with a fresh request ID where
	// it has one, and a string they hold that finds the request on the
	// wire among the lines after it was sent.
	params func() (key string, params any)
}

// drivenSeq makes the request IDs of drivenRequest unique in a run.
var drivenSeq atomic.Int64

// drivenRequests are the requests whose handlers may call the host:
// each operation with each of its inputs, each task and each check.
func drivenRequests(d PackageDriver) []drivenRequest {
	m := d.Manifest()
	var out []drivenRequest
	for _, o := range m.Provides.Operations {
		for _, in := range operationInputs(d, o) {
			method, _ := operationRequest(d, o, "", in)
			out = append(out, drivenRequest{
				what:   fmt.Sprintf("%s of %s with input %s", method, o.Name, describeInput(in)),
				method: method,
				params: func() (string, any) {
					req := fmt.Sprintf("certify-driven-%s-%d-%d", o.Name, drivenSeq.Add(1), time.Now().UnixNano())
					_, params := operationRequest(d, o, req, in)
					return req, params
				},
			})
		}
	}
	for _, t := range m.Provides.Tasks {
		out = append(out, drivenRequest{what: "task.run of " + t.Name, method: "task.run", params: func() (string, any) {
			return t.Name, protocol.TaskRunParams{Task: t.Name, Now: certifyNow}
		}})
	}
	for _, c := range m.Provides.Checks {
		out = append(out, drivenRequest{what: "check.run of " + c.Name, method: "check.run", params: func() (string, any) {
			return c.Name, protocol.CheckRunParams{Check: c.Name}
		}})
	}
	return out
}

// CheckPackageUnauthoredErrors makes the package fail in a way it did not
// author, without the author's help: on a spare process after its
// handshake, certification makes each request of drivenRequests, and then
// configure, while it answers every call the package makes to the host
// with an internal error (-32603) whose message carries a detail unique to
// that request, as a host's store failing would. Where the package's
// answer is an error, it must carry no trace of the detail (in its
// message, its data or anywhere else on its line), and it must be internal
// or an error the package authored (-32000 with data.code), never a
// JSON-RPC transport code (parse, method not found, invalid params). A
// request answered with a result handled the failure and shows nothing;
// when no request reaches an error path this way, the check is not
// applicable, never a pass.
func CheckPackageUnauthoredErrors(ctx context.Context, d PackageDriver) error {
	reqs := drivenRequests(d)
	reqs = append(reqs, drivenRequest{what: "configure", method: "configure", params: func() (string, any) {
		return "", d.ConfigureParams()
	}})
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before failing its host calls: %w", err)
		}
		var errs []error
		var seen, handled []string
		for i, r := range reqs {
			detail := fmt.Sprintf("certify-unauthored-%d-%d", i, time.Now().UnixNano())
			outcome, at := failHostCalls(ctx, d, p, r, detail)
			switch outcome.kind {
			case unauthoredLeaked:
				errs = append(errs, atWire(at, fmt.Errorf("%s, with its host calls failed: %s", r.what, outcome.detail)))
			case unauthoredKept:
				seen = append(seen, r.what+": "+outcome.detail)
			case unauthoredHandled:
				handled = append(handled, r.what+": "+outcome.detail)
			}
		}
		switch {
		case len(errs) > 0:
			return errors.Join(errs...)
		case len(seen) > 0:
			return nil
		case len(handled) > 0:
			return notApplicable("no request reached an error path with its host calls failed: %s", strings.Join(handled, "; "))
		}
		return notApplicable("no request certification makes (operations, tasks, checks, configure) called the host")
	})
}

type unauthoredKind int

const (
	unauthoredNoCall  unauthoredKind = iota // it made no host call to fail
	unauthoredHandled                       // it answered with a result
	unauthoredKept                          // it answered an error without the detail
	unauthoredLeaked                        // the detail crossed, or a transport code did
)

type unauthoredOutcome struct {
	kind   unauthoredKind
	detail string
}

// failHostCalls makes request r on p while every host call the package
// makes is answered internal with detail in its message, and says what
// the package's answer showed.
func failHostCalls(ctx context.Context, d PackageDriver, p RawPackage, r drivenRequest, detail string) (unauthoredOutcome, int) {
	var failed atomic.Int32
	restore := p.Intercept(func(_ context.Context, method string, _ json.RawMessage) (bool, any, error) {
		failed.Add(1)
		return true, nil, protocol.Errorf(protocol.CodeInternal, "%s: the host's store failed serving %s at /var/lib/certify/store.db", detail, method)
	})
	defer restore()
	key, params := r.params()
	from := len(d.Wire())
	cctx, cancel := context.WithTimeout(ctx, UnauthoredBound)
	err := p.Call(cctx, r.method, params, nil)
	cancel()
	msgs := decodeWire(d.Wire(), from)
	id, at := requestAt(msgs, r.method, key)
	var ans *wireMessage
	if id != "" {
		ans = answerTo(msgs, id)
	}
	switch {
	case failed.Load() == 0:
		return unauthoredOutcome{kind: unauthoredNoCall}, at
	case ans == nil:
		return unauthoredOutcome{kind: unauthoredLeaked, detail: fmt.Sprintf("no answer within %v: %v", UnauthoredBound, err)}, at
	case bytes.Contains(ans.line, []byte(detail)):
		return unauthoredOutcome{kind: unauthoredLeaked, detail: fmt.Sprintf("its answer carries the detail of a failure it did not author (%q), which belongs in its own log: %s", detail, clip(string(ans.line), 300))}, ans.index
	case ans.Error == nil:
		return unauthoredOutcome{kind: unauthoredHandled, detail: "answered with a result"}, at
	}
	code := ans.errorCode()
	switch ans.Error.Code {
	case protocol.WireInternal:
		return unauthoredOutcome{kind: unauthoredKept, detail: "answered internal without the detail"}, at
	case protocol.WireAuthored:
		if code == protocol.CodeCancelled || code == protocol.CodeOverloaded || code == protocol.CodeShuttingDown {
			return unauthoredOutcome{kind: unauthoredLeaked, detail: fmt.Sprintf("answered %s, which says nothing failed", code)}, ans.index
		}
		return unauthoredOutcome{kind: unauthoredKept, detail: fmt.Sprintf("answered its own %s without the detail", code)}, at
	}
	return unauthoredOutcome{kind: unauthoredLeaked, detail: fmt.Sprintf("answered JSON-RPC %d (%s): an unauthored failure crosses as internal (%d)", ans.Error.Code, clip(ans.Error.Message, 120), protocol.WireInternal)}, ans.index
}
