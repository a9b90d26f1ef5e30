package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// CancelBound is how long a cancelled handler has to show it stopped:
// cancel its own pending call to the host ($/cancel) or answer cancelled
// (-32800).
var CancelBound = 5 * time.Second

// executorWaitSettle is how long an executor.wait on a long run is left
// in flight before certification cancels it.
const executorWaitSettle = 200 * time.Millisecond

// CancelSettle is how long certification keeps watching a cancelled
// handler once the package showed it stopped (it cancelled its pending
// host call or answered cancelled): a handler that stopped makes no host
// call after $/cancel and answers nothing but cancelled, so the verdict
// rests on what the handler did in that time, not on when it did it.
var CancelSettle = 250 * time.Millisecond

// cancelOutcome is what one cancelled request showed.
type cancelOutcome int

const (
	cancelStopped     cancelOutcome = iota // it cancelled its host call or answered -32800
	cancelKeptRunning                      // it went on as if never cancelled
	cancelFinished                         // it answered before it could be cancelled
	cancelRefused                          // it refused the request before it could be cancelled
)

// CheckPackageCancellation cancels requests on a spare process after its
// handshake. A $/cancel for a request it never had is ignored. Then each
// operation is called with each of its inputs while the host holds every
// call the package makes unanswered: once the handler waits on its host
// call, certification cancels the request, and within CancelBound the
// package must show the handler stopped, by cancelling its pending host
// call or answering cancelled; a handler that keeps waiting fails. The
// verdict then waits CancelSettle more and rests on what the handler did:
// a host call made after $/cancel, or an answer other than cancelled,
// says it went on, however soon it showed a sign of stopping. An
// executor.wait on a run in progress is cancelled the same way: it must
// be answered cancelled, or not at all even once the run is stopped. A
// check that could cancel nothing in flight because the package refused
// every input fails as "could not exercise", naming the inputs.
func CheckPackageCancellation(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before cancelling: %w", err)
		}
		var errs []error
		stillServing := func(after string) {
			cctx, cancel := context.WithTimeout(ctx, PackageExitBound)
			defer cancel()
			if err := p.Call(cctx, "configure", d.ConfigureParams(), nil); err != nil {
				errs = append(errs, fmt.Errorf("after %s the package no longer serves: %w", after, err))
			}
		}
		if err := p.Notify(ctx, "$/cancel", map[string]any{"id": 987654321}); err != nil {
			return fmt.Errorf("sending $/cancel: %w", err)
		}
		stillServing("a $/cancel for a request it never had")

		stopped, refused := 0, 0
		var tried []string
		for _, o := range m.Provides.Operations {
			for i, in := range operationInputs(d, o) {
				req := fmt.Sprintf("certify-cancel-%s-%d-%d", o.Name, i, time.Now().UnixNano())
				method, params := operationRequest(d, o, req, in)
				what := fmt.Sprintf("operation %s with input %s", o.Name, describeInput(in))
				outcome, detail, at := cancelInFlight(ctx, d, p, method, req, params, CancelBound)
				tried = append(tried, what+": "+detail)
				switch outcome {
				case cancelStopped:
					stopped++
				case cancelKeptRunning:
					errs = append(errs, atWire(at, fmt.Errorf("%s: %s", what, detail)))
				case cancelRefused:
					refused++
				}
				stillServing("cancelling " + what)
				if outcome == cancelStopped || outcome == cancelKeptRunning {
					break // one cancelled handler per operation says it
				}
			}
		}
		for _, e := range m.Provides.Executors {
			run := newRun(d, e.Name, fmt.Sprintf("cancel-%d", time.Now().UnixNano()), cmdLong)
			if err := run.start(ctx, p, cmdLong); err != nil {
				errs = append(errs, err)
				continue
			}
			what := fmt.Sprintf("executor %s: executor.wait of a run in progress", e.Name)
			outcome, detail, at := cancelInFlight(ctx, d, p, "executor.wait", run.runID,
				protocol.ExecutorWaitParams{Executor: e.Name, RunID: run.runID}, executorWaitSettle)
			if outcome == cancelKeptRunning && strings.HasPrefix(detail, noAnswerYet) {
				// Not answering a cancelled request is allowed; a handler
				// still waiting answers the wait once its run ends.
				if err := run.stopped(ctx, p); err != nil {
					// Without a stopped run there is no telling a handler that
					// stopped from one still waiting.
					outcome, detail = cancelFinished, "it did not answer the cancelled wait, and the run could not be stopped to see whether its handler still waited: "+clip(err.Error(), 160)
				} else if late := awaitAnswer(ctx, d, "executor.wait", run.runID, CancelBound); late != nil && late.Error == nil {
					detail = "it kept waiting after $/cancel and answered the wait with a result once the run was stopped"
				} else {
					outcome, detail = cancelStopped, "it did not answer the cancelled wait, even once the run was stopped"
				}
			} else {
				run.stop(ctx, p)
			}
			tried = append(tried, what+": "+detail)
			switch outcome {
			case cancelStopped:
				stopped++
			case cancelKeptRunning:
				errs = append(errs, atWire(at, fmt.Errorf("%s: %s", what, detail)))
			case cancelRefused:
				refused++
			}
			stillServing("cancelling " + what)
		}
		switch {
		case len(errs) > 0:
			return errors.Join(errs...)
		case stopped > 0:
			return nil
		case refused > 0:
			return fmt.Errorf("could not exercise: no request stayed in flight to cancel: %s (give inputs the package accepts in %s)", strings.Join(tried, "; "), InputsFile)
		case len(tried) > 0:
			return notApplicable("no request stayed in flight long enough to cancel: %s", strings.Join(tried, "; "))
		}
		return notApplicable("the manifest declares no operation or executor to cancel")
	})
}

// noAnswerYet starts the detail of a request that neither answered nor
// cancelled its host call within the bound.
const noAnswerYet = "no sign it stopped"

// cancelInFlight makes one request with the package's host calls held,
// cancels it once its handler waits on one (or after settle when it makes
// none), and says what the package showed within CancelBound. key is a
// string the request's params hold (its request or run ID), to find it
// on the wire among the other lines.
func cancelInFlight(ctx context.Context, d PackageDriver, p RawPackage, method, key string, params any, settle time.Duration) (outcome cancelOutcome, detail string, at int) {
	hold, release := holdCalls()
	restore := p.Intercept(hold)
	defer func() {
		release()
		restore()
	}()
	from := len(d.Wire())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := make(chan error, 1)
	go func() { answered <- p.Call(cctx, method, params, nil) }()

	// Wait for the handler to call the host, or to answer first.
	timer := time.NewTimer(settle)
	defer timer.Stop()
	var reqID string
	var pending *wireMessage
wait:
	for {
		changed := d.WireChanged()
		msgs := decodeWire(d.Wire(), from)
		reqID, at = requestAt(msgs, method, key)
		if reqID != "" {
			if ans := answerTo(msgs, reqID); ans != nil {
				<-answered
				if ans.Error != nil {
					return cancelRefused, fmt.Sprintf("refused before it could be cancelled: %d %s", ans.Error.Code, clip(ans.Error.Message, 160)), at
				}
				return cancelFinished, "answered before it could be cancelled, without calling the host", at
			}
			if cb := firstCallbackAfter(msgs, reqID); cb != nil {
				pending = cb
				break wait
			}
		}
		select {
		case <-changed:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			return cancelKeptRunning, "the check ended: " + ctx.Err().Error(), at
		}
	}
	cancel() // sends $/cancel for the request
	<-answered
	// First a sign that the handler stopped, within CancelBound: its
	// answer, or its own $/cancel of the host call it waits on.
	bound := time.NewTimer(CancelBound)
	defer bound.Stop()
	var sign string
	for sign == "" {
		changed := d.WireChanged()
		msgs := decodeWire(d.Wire(), from)
		if ans := answerTo(msgs, reqID); ans != nil {
			if kept, why := keptRunningAnswer(ans, pending); kept {
				return cancelKeptRunning, why, at
			}
			sign = "answered cancelled (-32800)"
			break
		}
		if pending != nil && cancelledCallback(msgs, string(pending.ID)) {
			sign = fmt.Sprintf("cancelled its pending %s", pending.Method)
			break
		}
		select {
		case <-changed:
		case <-bound.C:
			if pending != nil {
				return cancelKeptRunning, fmt.Sprintf("%s within %v of $/cancel: it neither cancelled its pending %s nor answered cancelled (-32800); its handler kept waiting", noAnswerYet, CancelBound, pending.Method), at
			}
			return cancelKeptRunning, fmt.Sprintf("%s within %v of $/cancel: it did not answer cancelled (-32800)", noAnswerYet, CancelBound), at
		case <-ctx.Done():
			return cancelKeptRunning, "the check ended: " + ctx.Err().Error(), at
		}
	}
	// Then CancelSettle in which the handler, had it not stopped, would
	// go on: a host call made after $/cancel, or an answer other than
	// cancelled, says it did not.
	after := cancelLine(decodeWire(d.Wire(), from), reqID)
	watch := time.NewTimer(CancelSettle)
	defer watch.Stop()
	for {
		changed := d.WireChanged()
		msgs := decodeWire(d.Wire(), from)
		if cb := firstCallbackFrom(msgs, after); cb != nil {
			return cancelKeptRunning, fmt.Sprintf("%s, then called the host again (%s %s): its handler went on after $/cancel", sign, cb.Method, clip(string(cb.Params), 120)), cb.index
		}
		if ans := answerTo(msgs, reqID); ans != nil {
			if kept, why := keptRunningAnswer(ans, pending); kept {
				return cancelKeptRunning, sign + "; then " + why, at
			}
		}
		select {
		case <-changed:
		case <-watch.C:
			return cancelStopped, sign, at
		case <-ctx.Done():
			return cancelKeptRunning, "the check ended: " + ctx.Err().Error(), at
		}
	}
}

// keptRunningAnswer says whether an answer to a cancelled request shows
// its handler went on: anything but cancelled (-32800).
func keptRunningAnswer(ans *wireMessage, pending *wireMessage) (bool, string) {
	switch {
	case ans.Error != nil && ans.Error.Code == jsonrpc.CodeCancelled:
		return false, ""
	case ans.Error != nil:
		return true, fmt.Sprintf("after $/cancel it answered error %d (%s), not cancelled (%d)", ans.Error.Code, clip(ans.Error.Message, 160), jsonrpc.CodeCancelled)
	case pending != nil:
		return true, fmt.Sprintf("after $/cancel it answered with a result, though its %s was still unanswered", pending.Method)
	}
	return true, "after $/cancel it answered with a result"
}

// cancelLine is the index in msgs of the host's $/cancel for request id
// (len(msgs) when it is not there).
func cancelLine(msgs []wireMessage, id string) int {
	for i, m := range msgs {
		if !m.fromExtension && m.json && m.Method == "$/cancel" && !m.request() {
			var p struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(m.Params, &p) == nil && string(p.ID) == id {
				return i
			}
		}
	}
	return len(msgs)
}

// firstCallbackFrom is the first call the package made to the host in
// msgs[i:].
func firstCallbackFrom(msgs []wireMessage, i int) *wireMessage {
	for ; i < len(msgs); i++ {
		if m := msgs[i]; m.fromExtension && m.json && m.request() {
			return &msgs[i]
		}
	}
	return nil
}

// requestOf is the id of the host's request of method whose params hold
// key, "" when it is not on the wire yet.
func requestOf(msgs []wireMessage, method, key string) string {
	id, _ := requestAt(msgs, method, key)
	return id
}

// requestAt is requestOf with the request's line on the wire.
func requestAt(msgs []wireMessage, method, key string) (string, int) {
	for _, m := range msgs {
		if !m.fromExtension && m.request() && m.Method == method && strings.Contains(string(m.Params), key) {
			return string(m.ID), m.index
		}
	}
	return "", -1
}

// answerTo is the package's answer to the host's request id.
func answerTo(msgs []wireMessage, id string) *wireMessage {
	seen := false
	for i, m := range msgs {
		if !m.fromExtension && m.request() && string(m.ID) == id {
			seen = true
		}
		if seen && m.fromExtension && m.json && !m.request() && m.Method == "" && string(m.ID) == id {
			return &msgs[i]
		}
	}
	return nil
}

// firstCallbackAfter is the first call the package made to the host after
// the host's request id.
func firstCallbackAfter(msgs []wireMessage, id string) *wireMessage {
	seen := false
	for i, m := range msgs {
		if !m.fromExtension && m.request() && string(m.ID) == id {
			seen = true
			continue
		}
		if seen && m.fromExtension && m.json && m.request() {
			return &msgs[i]
		}
	}
	return nil
}

// cancelledCallback reports whether the package sent $/cancel for its own
// call id.
func cancelledCallback(msgs []wireMessage, id string) bool {
	for _, m := range msgs {
		if m.fromExtension && m.json && m.Method == "$/cancel" && !m.request() {
			var p struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(m.Params, &p) == nil && string(p.ID) == id {
				return true
			}
		}
	}
	return false
}

// awaitAnswer waits up to bound for the package's answer to the request
// of method whose params hold key.
func awaitAnswer(ctx context.Context, d PackageDriver, method, key string, bound time.Duration) *wireMessage {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		changed := d.WireChanged()
		msgs := decodeWire(d.Wire(), 0)
		if id := requestOf(msgs, method, key); id != "" {
			if ans := answerTo(msgs, id); ans != nil {
				return ans
			}
		}
		select {
		case <-changed:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}
