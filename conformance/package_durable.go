package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// A package's durable state is what it keeps in host KV, recovery
// metadata or its state directory: what survives a crash. Certification
// makes an effect through what the package declares and then looks for it
// after a crash through the package itself: a handler operation must make
// its effect once per request ID, so a retry with the same ID after a
// SIGKILL and a restart must find the first call's record and change
// nothing. A package that keeps that record in memory, or in a file a
// crash can lose, makes the effect again.

// durableEffect is one handler call made before the crash.
type durableEffect struct {
	what   string
	params protocol.OperationCallParams
	output []byte
}

// CheckPackageDurableState calls each handler operation on the supervised
// process and retries it with the same request ID, which must answer the
// same and change nothing (else operations/idempotent judges it and this
// check has no effect to follow); kills the process group (SIGKILL) and
// waits for the host's restart; then retries each call once more: it must
// answer as before the crash and make no KV write, Event, delivery or
// timer.
func CheckPackageDurableState(ctx context.Context, d PackageDriver) error {
	var effects []durableEffect
	var skipped []string
	handlers := 0
	for _, o := range d.Manifest().Provides.Operations {
		if o.Kind != protocol.OperationKindHandler {
			continue
		}
		handlers++
		for n, in := range operationInputs(d, o) {
			p := protocol.OperationCallParams{Operation: o.Name, RequestID: fmt.Sprintf("certify-durable-%s-%d-%d", o.Name, n, time.Now().UnixNano()),
				Input: in, Authority: authority(d)}
			what := fmt.Sprintf("operation %s with input %s", o.Name, describeInput(in))
			var first, again protocol.OperationCallResult
			c1 := observe(ctx, d, "operation.call", p, &first)
			if c1.err != nil {
				skipped = append(skipped, fmt.Sprintf("%s was refused: %s", what, clip(c1.err.Error(), 160)))
				continue
			}
			c2 := observe(ctx, d, "operation.call", p, &again)
			if c2.err != nil || len(writes(callbacks(c2.during))) > 0 || !sameJSON(first.Output, again.Output) {
				skipped = append(skipped, what+" is not idempotent even without a crash (operations/idempotent judges that)")
				break
			}
			effects = append(effects, durableEffect{what: what, params: p, output: first.Output})
			break
		}
	}
	switch {
	case handlers == 0:
		return notApplicable("the manifest declares no handler operation, whose effect certification could make and look for after a crash")
	case len(effects) == 0:
		return notApplicable("no handler operation made an effect to look for after a crash: %s", strings.Join(skipped, "; "))
	}
	if err := crashAndRestart(ctx, d); err != nil {
		return err
	}
	var errs []error
	for _, e := range effects {
		var res protocol.OperationCallResult
		c := observe(ctx, d, "operation.call", e.params, &res)
		switch {
		case c.err != nil:
			errs = append(errs, fmt.Errorf("%s: retried with request ID %q after the crash it was refused (%s); before the crash it answered", e.what, e.params.RequestID, clip(c.err.Error(), 160)))
			continue
		case !sameJSON(res.Output, e.output):
			errs = append(errs, fmt.Errorf("%s: retried with request ID %q after the crash it answered %s, not %s as before: the record of the first call did not survive the crash",
				e.what, e.params.RequestID, clip(string(res.Output), 160), clip(string(e.output), 160)))
		}
		if w := writes(callbacks(c.during)); len(w) > 0 {
			errs = append(errs, atWire(w[0].index, fmt.Errorf("%s: retried with request ID %q after the crash it made its effect again (%s): the effect made before the crash was not durable",
				e.what, e.params.RequestID, describeCallbacks(w))))
		}
	}
	return errors.Join(errs...)
}

// crashAndRestart kills the supervised process's group with SIGKILL and
// waits, within PackageRestartBound, for the host to restart it and for
// the new process to serve configure.
func crashAndRestart(ctx context.Context, d PackageDriver) error {
	gen := d.Generation()
	if err := d.Kill(); err != nil {
		return fmt.Errorf("killing the package: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, PackageRestartBound)
	defer cancel()
	var err error
	for rctx.Err() == nil {
		// Call waits for the restarted process; a call that raced the
		// crash fails with a transport error and is made again.
		if err = d.Call(rctx, "configure", d.ConfigureParams(), nil); err == nil && d.Generation() > gen {
			break
		}
	}
	if d.Generation() <= gen {
		return fmt.Errorf("the package was not restarted within %v of being killed: %v", PackageRestartBound, err)
	}
	if err != nil {
		return fmt.Errorf("the restarted package did not serve configure: %w", err)
	}
	return nil
}
