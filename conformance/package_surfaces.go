package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// kvNamespaces are the namespaces a KV or event callback names.
func kvNamespaces(c wireMessage) []string {
	var p struct {
		Namespace     string `json:"namespace"`
		Preconditions []struct {
			Namespace string `json:"namespace"`
		} `json:"preconditions"`
		Puts []struct {
			Namespace string `json:"namespace"`
		} `json:"puts"`
		Deletes []struct {
			Namespace string `json:"namespace"`
		} `json:"deletes"`
	}
	if json.Unmarshal(c.Params, &p) != nil {
		return nil
	}
	var out []string
	if c.Method == "kv.get" || c.Method == "kv.list" {
		out = append(out, p.Namespace)
	}
	for _, x := range p.Preconditions {
		out = append(out, x.Namespace)
	}
	for _, x := range p.Puts {
		out = append(out, x.Namespace)
	}
	for _, x := range p.Deletes {
		out = append(out, x.Namespace)
	}
	return out
}

// CheckPackageKVScoping exercises the package, then checks every KV
// callback on the wire so far, from configure on: each must name only the
// package's own namespaces. An attempt the host refused still fails. A
// package that made no KV call while exercised gave nothing to check, and
// the check skips.
func CheckPackageKVScoping(ctx context.Context, d PackageDriver) error {
	if err := exercise(ctx, d); err != nil {
		return err
	}
	name := d.Manifest().Name
	var errs []error
	seen := map[string]bool{}
	calls := 0
	for _, c := range callbacks(decodeWire(d.Wire(), 0)) {
		switch c.Method {
		case "kv.get", "kv.list", "kv.commit", "event.accept":
			calls++
		default:
			continue
		}
		for _, ns := range kvNamespaces(c) {
			if protocol.Namespace(name, ns) || seen[c.Method+" "+ns] {
				continue
			}
			seen[c.Method+" "+ns] = true
			errs = append(errs, atWire(c.index, fmt.Errorf("%s named namespace %q, outside the namespaces of %s: %s", c.Method, ns, name, clip(string(c.Params), 200))))
		}
	}
	if calls == 0 {
		return notApplicable("the package made no KV call (kv.get, kv.list, kv.commit, event.accept) while certification exercised it")
	}
	return errors.Join(errs...)
}

// CheckPackageKVAtomicity contends the package's KV writes on a spare
// process after its handshake: configure is sent again, and each handler
// operation is called twice at once with each of its inputs, under
// different request IDs, while the host refuses the first
// precondition-guarded kv.commit of each round as a conflict (as it does
// when a concurrent write changed a guarded key).
// After a commit refused as a conflict the package must read again before
// it commits to the same keys, or guard the batch, never overwrite
// blindly. A package that made no guarded commit to refuse skips; one
// whose every call was refused could not be exercised, and fails so.
func CheckPackageKVAtomicity(ctx context.Context, d PackageDriver) error {
	var ops []protocol.OperationDecl
	for _, o := range d.Manifest().Provides.Operations {
		if o.Kind == protocol.OperationKindHandler {
			ops = append(ops, o)
		}
	}
	if len(ops) == 0 {
		return notApplicable("the manifest declares no handler operation to contend")
	}
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before contending: %w", err)
		}
		from := len(d.Wire())
		var tried []string
		restore := p.Intercept(conflictFirstGuarded())
		err := p.Call(ctx, "configure", d.ConfigureParams(), nil)
		restore()
		if err != nil {
			tried = append(tried, "configure (refused: "+clip(err.Error(), 160)+")")
		}
		// One call at a time first, so each commit's reads are its own
		// call's: whether a read-modify-write is guarded is then decided
		// from the wire alone, never from how two calls interleaved.
		for _, o := range ops {
			for n, in := range operationInputs(d, o) {
				restore := p.Intercept(conflictFirstGuarded())
				_ = p.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: o.Name,
					RequestID: fmt.Sprintf("certify-rmw-%s-%d", o.Name, n), Input: in, Authority: authority(d)}, nil)
				restore()
			}
		}
		sequential := len(d.Wire())
		answered := 0
		for _, o := range ops {
			for n, in := range operationInputs(d, o) {
				restore := p.Intercept(conflictFirstGuarded())
				errs := make(chan error, 2)
				for i := range 2 {
					go func() {
						errs <- p.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: o.Name,
							RequestID: fmt.Sprintf("certify-contend-%s-%d-%d-%d", o.Name, n, i, time.Now().UnixNano()),
							Input:     in, Authority: authority(d)}, nil)
					}()
				}
				var outcome []string
				for range 2 {
					if err := <-errs; err != nil {
						outcome = append(outcome, "refused: "+clip(err.Error(), 160))
					} else {
						answered++
						outcome = append(outcome, "answered")
					}
				}
				restore()
				tried = append(tried, fmt.Sprintf("operation %s with input %s (%s)", o.Name, describeInput(in), strings.Join(outcome, ", ")))
			}
		}
		msgs := decodeWire(d.Wire(), from)
		errs := unguardedWrites(callbacks(decodeWire(d.Wire()[:sequential], from)))
		cbs := callbacks(msgs)
		conflicts := 0
		for i, c := range cbs {
			if c.Method != "kv.commit" || !conflicted(msgs, c) {
				continue
			}
			conflicts++
			keys := commitKeys(c)
			for _, next := range cbs[i+1:] {
				if next.Method == "kv.get" || next.Method == "kv.list" {
					break // read again
				}
				if next.Method == "kv.commit" && overlaps(keys, commitKeys(next)) && !guarded(next) {
					errs = append(errs, atWire(next.index, fmt.Errorf("after a kv.commit refused as a conflict the package committed to the same keys again without reading them or guarding the batch: %s", clip(string(next.Params), 200))))
					break
				}
			}
		}
		switch {
		case len(errs) > 0:
			return errors.Join(errs...)
		case conflicts > 0:
			return nil
		case answered == 0:
			return fmt.Errorf("could not exercise: every contending call was refused: %s (give inputs the package accepts in %s)", strings.Join(tried, "; "), InputsFile)
		}
		return notApplicable("the package made no precondition-guarded kv.commit for the host to refuse as a conflict: %s", strings.Join(tried, "; "))
	})
}

// unguardedWrites reads callbacks made one call at a time: a kv.commit
// that writes or deletes a key the package read (kv.get) since its
// previous commit must carry a precondition on that key, or a concurrent
// write between the read and the commit would be overwritten unseen.
func unguardedWrites(cbs []wireMessage) []error {
	var errs []error
	read := map[string]bool{}
	for _, c := range cbs {
		switch c.Method {
		case "kv.get":
			var p protocol.KVGetParams
			if json.Unmarshal(c.Params, &p) == nil {
				read[p.Namespace+"\x00"+p.Key] = true
			}
		case "kv.commit":
			var p protocol.KVCommitParams
			_ = json.Unmarshal(c.Params, &p)
			guards := map[string]bool{}
			for _, x := range p.Preconditions {
				guards[x.Namespace+"\x00"+x.Key] = true
			}
			for _, k := range slices.Sorted(maps.Keys(commitKeys(c))) {
				if read[k] && !guards[k] {
					ns, key, _ := strings.Cut(k, "\x00")
					errs = append(errs, atWire(c.index, fmt.Errorf("a kv.commit writes %s/%s, which the package read before it, without a precondition on it: a write made between the read and the commit would be lost", ns, clip(key, 80))))
					break
				}
			}
			read = map[string]bool{}
		}
	}
	return errs
}

// conflicted reports whether the host answered callback c with conflict.
func conflicted(msgs []wireMessage, c wireMessage) bool {
	for _, m := range msgs {
		if m.index > c.index && !m.fromExtension && !m.request() && string(m.ID) == string(c.ID) {
			return m.errorCode() == protocol.CodeConflict
		}
	}
	return false
}

func commitKeys(c wireMessage) map[string]bool {
	var p protocol.KVCommitParams
	_ = json.Unmarshal(c.Params, &p)
	out := map[string]bool{}
	for _, x := range p.Puts {
		out[x.Namespace+"\x00"+x.Key] = true
	}
	for _, x := range p.Deletes {
		out[x.Namespace+"\x00"+x.Key] = true
	}
	return out
}

func guarded(c wireMessage) bool {
	var p protocol.KVCommitParams
	_ = json.Unmarshal(c.Params, &p)
	return len(p.Preconditions) > 0
}

func overlaps(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// routeEvents are the Events the route checks match: a synthetic one of
// each family, the author's (InputsFile) and, when the handler offers
// samples, each sample.
func routeEvents(ctx context.Context, d PackageDriver, r protocol.RouteDecl) []protocol.Event {
	events := append(syntheticEvents(d), routeInputEvents(d, r.Handler)...)
	if r.Samples {
		var res protocol.RouteSamplesResult
		if err := d.Call(ctx, "route.samples", protocol.RouteSamplesParams{Handler: r.Handler, ScopeID: scope(d), Now: certifyNow}, &res); err == nil {
			for i, s := range res.Samples {
				events = append(events, eventOf(d, s.Event, int64(100+i)))
			}
		}
	}
	return events
}

// CheckPackageRoutesPure asks each route handler to match each Event twice:
// the answers must be the same, and the package must make no call to the
// host while it decides.
func CheckPackageRoutesPure(ctx context.Context, d PackageDriver) error {
	if len(d.Manifest().Provides.Routes) == 0 {
		return notApplicable("the manifest declares no route handler")
	}
	var errs []error
	var refusals []string
	answered := 0
	for _, r := range d.Manifest().Provides.Routes {
		for _, e := range routeEvents(ctx, d, r) {
			params := protocol.RouteMatchParams{Handler: r.Handler, ScopeID: scope(d), Event: e}
			var answers [2]json.RawMessage
			for i := range 2 {
				c := observe(ctx, d, "route.match", params, &answers[i])
				if c.err == nil {
					answered++
				} else if i == 0 {
					refusals = append(refusals, fmt.Sprintf("route %s: %s %s: %s", r.Handler, e.Family, e.DeliveryID, clip(c.err.Error(), 120)))
				}
				if cbs := callbacks(c.during); len(cbs) > 0 {
					errs = append(errs, atWire(cbs[0].index, fmt.Errorf("route %s: route.match of %s %s called the host while deciding: %s", r.Handler, e.Family, e.DeliveryID, describeCallbacks(cbs))))
				}
				if c.err != nil {
					answers[i] = json.RawMessage(fmt.Sprintf("%q", "error: "+protocol.CodeOf(c.err)))
					if !serving(c.err) {
						errs = append(errs, fmt.Errorf("route %s: route.match of %s %s: %w", r.Handler, e.Family, e.DeliveryID, c.err))
					}
				}
			}
			if !sameJSON(answers[0], answers[1]) {
				errs = append(errs, fmt.Errorf("route %s: route.match of %s %s answered differently for the same input: %s, then %s",
					r.Handler, e.Family, e.DeliveryID, clip(string(answers[0]), 200), clip(string(answers[1]), 200)))
			}
		}
	}
	if len(errs) == 0 && answered == 0 {
		return fmt.Errorf("could not exercise: route.match refused every Event certification offered: %s (give Events the package accepts under routes in %s)", strings.Join(refusals, "; "), InputsFile)
	}
	return errors.Join(errs...)
}

// stretched are variants of e whose payload's top-level strings are long
// (well past every display limit) or run over several lines: a display
// built from them must still keep the limits. A payload that is not a
// JSON object, or has no string, gives none.
func stretched(e protocol.Event) []protocol.Event {
	var fields map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &fields) != nil {
		return nil
	}
	var out []protocol.Event
	for n, stretch := range []func(string) string{
		func(v string) string { return v + " " + strings.Repeat("long ", 600) },
		func(v string) string { return v + "\nsecond line\r\nthird line\ttabbed" },
	} {
		changed := map[string]json.RawMessage{}
		for k, raw := range fields {
			var v string
			if json.Unmarshal(raw, &v) == nil && k != "id" {
				raw, _ = json.Marshal(stretch(v))
			}
			changed[k] = raw
		}
		payload, _ := json.Marshal(changed)
		if string(payload) == string(mustCompact(e.Payload)) {
			continue
		}
		x := e
		x.DeliveryID = fmt.Sprintf("%s-stretched-%d", e.DeliveryID, n+1)
		x.ID = protocol.EmittedEventID(x.Source, x.DeliveryID)
		x.Root, x.Payload = x.ID, payload
		out = append(out, x)
	}
	return out
}

// hostileLinks are links of schemes a display may never carry (the spec:
// each link an http or https URL), with and without a host, so a package
// that checks only for a host is seen too.
var hostileLinks = []string{
	"javascript:alert(document.cookie)",
	"javascript://notes.example/%0Aalert(1)",
	"JavaScript://notes.example/%0Aalert(2)",
	"data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
	"data://notes.example/text/html,hello",
	"file:///etc/passwd",
	"file://notes.example/etc/passwd",
}

// relinked are variants of e whose payload's top-level links (a string
// that is an absolute URL, or under a key naming a link, url or href)
// are each of hostileLinks in turn: a display built from them must drop
// the link, never carry it. A payload without a link gives none.
func relinked(e protocol.Event) []protocol.Event {
	var fields map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &fields) != nil {
		return nil
	}
	var links []string
	for k, raw := range fields {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		key := strings.ToLower(k)
		u, err := url.Parse(v)
		if strings.Contains(key, "link") || strings.Contains(key, "url") || strings.Contains(key, "href") || (err == nil && u.Scheme != "" && u.Host != "") {
			links = append(links, k)
		}
	}
	if len(links) == 0 {
		return nil
	}
	var out []protocol.Event
	for n, link := range hostileLinks {
		changed := maps.Clone(fields)
		for _, k := range links {
			changed[k], _ = json.Marshal(link)
		}
		payload, _ := json.Marshal(changed)
		x := e
		x.DeliveryID = fmt.Sprintf("%s-relinked-%d", e.DeliveryID, n+1)
		x.ID = protocol.EmittedEventID(x.Source, x.DeliveryID)
		x.Root, x.Payload = x.ID, payload
		out = append(out, x)
	}
	return out
}

// mustCompact is raw re-encoded as a map would be, for comparing.
func mustCompact(raw json.RawMessage) []byte {
	var v map[string]json.RawMessage
	_ = json.Unmarshal(raw, &v)
	out, _ := json.Marshal(v)
	return out
}

// CheckPackageRoutesDisplay matches each Event with each route handler that
// declares a display, and each again with long and multi-line strings in
// its payload (stretched) and with its links turned to javascript:, data:
// and file: URLs (relinked): every display a decision carries must keep
// the display limits and link only to http or https URLs.
func CheckPackageRoutesDisplay(ctx context.Context, d PackageDriver) error {
	var errs []error
	checked := 0
	for _, r := range d.Manifest().Provides.Routes {
		if !r.Display {
			continue
		}
		var events []protocol.Event
		for _, e := range routeEvents(ctx, d, r) {
			events = append(events, e)
			events = append(events, stretched(e)...)
			events = append(events, relinked(e)...)
		}
		for _, e := range events {
			var res protocol.RouteMatchResult
			if err := d.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: r.Handler, ScopeID: scope(d), Event: e}, &res); err != nil {
				if !serving(err) {
					errs = append(errs, fmt.Errorf("route %s: route.match: %w", r.Handler, err))
				}
				continue
			}
			if res.Display == nil {
				continue
			}
			checked++
			disp := runtime.Display{Title: res.Display.Title, Ref: res.Display.Ref, Requester: res.Display.Requester}
			for _, l := range res.Display.Links {
				disp.Links = append(disp.Links, runtime.DisplayLink{Label: l.Label, URL: l.URL})
			}
			if err := runtime.ValidateDisplay(disp); err != nil {
				errs = append(errs, fmt.Errorf("route %s: the display of %s %s breaks the display limits: %w", r.Handler, e.Family, e.DeliveryID, err))
			}
		}
	}
	if len(errs) == 0 && checked == 0 {
		return notApplicable("no route decision carried a display for the Events certification could offer")
	}
	return errors.Join(errs...)
}

// CheckPackageRouteSamples asks each handler that declares samples for
// them, on a fixed host clock: each sample needs an ID and a title, a
// payload the package may write (its own source and declared family, the
// schema absent or current) timed no later than the host's now, and
// offering them calls nothing on the host.
func CheckPackageRouteSamples(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	declared := map[string]bool{}
	for _, f := range families(m) {
		declared[f] = true
	}
	var errs []error
	checked := 0
	for _, r := range m.Provides.Routes {
		if !r.Samples {
			continue
		}
		checked++
		var res protocol.RouteSamplesResult
		c := observe(ctx, d, "route.samples", protocol.RouteSamplesParams{Handler: r.Handler, ScopeID: scope(d), Now: certifyNow}, &res)
		if c.err != nil {
			errs = append(errs, fmt.Errorf("route %s: route.samples: %w", r.Handler, c.err))
			continue
		}
		if cbs := callbacks(c.during); len(cbs) > 0 {
			errs = append(errs, fmt.Errorf("route %s: route.samples called the host: %s", r.Handler, describeCallbacks(cbs)))
		}
		if len(res.Samples) == 0 {
			errs = append(errs, fmt.Errorf("route %s declares samples but route.samples offered none", r.Handler))
		}
		ids := map[string]bool{}
		for _, s := range res.Samples {
			e := s.Event
			bad := func(format string, args ...any) {
				errs = append(errs, fmt.Errorf("route %s: sample %q: %s", r.Handler, s.ID, fmt.Sprintf(format, args...)))
			}
			switch {
			case s.ID == "":
				bad("it has no ID")
			case ids[s.ID]:
				bad("its ID is offered twice")
			}
			ids[s.ID] = true
			if s.Title == "" {
				bad("it has no title")
			}
			if !protocol.SourceNamespace(m.Name, e.Source) {
				bad("source %q is not in the source namespace of %s", e.Source, m.Name)
			}
			if e.DeliveryID == "" {
				bad("its Event has no delivery ID")
			}
			if !declared[e.Family] {
				bad("family %q is not declared by the manifest", e.Family)
			}
			if err := m.CheckWrite(e.Schema); err != nil {
				bad("%v", err)
			}
			if e.OccurredAt.After(certifyNow) {
				bad("it occurred at %s, after the host's now %s: samples are timed by the host's clock", e.OccurredAt.Format(time.RFC3339), certifyNow.Format(time.RFC3339))
			}
		}
	}
	if checked == 0 {
		return notApplicable("no route handler declares samples")
	}
	return errors.Join(errs...)
}

// CheckPackageOperationsIdempotent calls each handler operation twice with
// one request ID, with each of its inputs: the second call must change
// nothing (no KV write, Event, delivery or timer) and answer as the first
// did. A check whose every first call was refused observed no effect to
// repeat: it fails as "could not exercise", naming the inputs.
func CheckPackageOperationsIdempotent(ctx context.Context, d PackageDriver) error {
	var errs []error
	var tried []string
	checked, exercised := 0, 0
	for _, o := range d.Manifest().Provides.Operations {
		if o.Kind != protocol.OperationKindHandler {
			continue
		}
		checked++
		for n, in := range operationInputs(d, o) {
			p := protocol.OperationCallParams{Operation: o.Name, RequestID: fmt.Sprintf("certify-idempotent-%s-%d-%d", o.Name, n, time.Now().UnixNano()),
				Input: in, Authority: authority(d)}
			var first, second protocol.OperationCallResult
			c1 := observe(ctx, d, "operation.call", p, &first)
			c2 := observe(ctx, d, "operation.call", p, &second)
			if !serving(c1.err) || !serving(c2.err) {
				errs = append(errs, fmt.Errorf("operation %s: not answered: %v", o.Name, errors.Join(c1.err, c2.err)))
				continue
			}
			if w := writes(callbacks(c2.during)); len(w) > 0 {
				errs = append(errs, atWire(w[0].index, fmt.Errorf("operation %s: called again with request ID %q it made its effect again: %s", o.Name, p.RequestID, describeCallbacks(w))))
			}
			if (c1.err == nil) != (c2.err == nil) {
				errs = append(errs, fmt.Errorf("operation %s: the same request answered %v, then %v", o.Name, c1.err, c2.err))
			}
			if c1.err != nil {
				tried = append(tried, fmt.Sprintf("operation %s refused input %s: %s", o.Name, describeInput(in), clip(c1.err.Error(), 160)))
				continue
			}
			exercised++
		}
	}
	switch {
	case checked == 0:
		return notApplicable("the manifest declares no handler operation")
	case len(errs) == 0 && exercised == 0:
		return fmt.Errorf("could not exercise: %s (give inputs the package accepts in %s)", strings.Join(tried, "; "), InputsFile)
	}
	return errors.Join(errs...)
}

// inTxCall is one in-transaction call certification can make.
type inTxCall struct {
	what   string
	method string
	params any
	result any
}

// inTxCalls lists the in-transaction calls the manifest declares. An emit
// operation with commit is planned first with operation.emit, outside the
// deadline, as the toolbelt would.
func inTxCalls(ctx context.Context, d PackageDriver) []inTxCall {
	m := d.Manifest()
	var out []inTxCall
	for _, r := range m.Provides.Recurrences {
		out = append(out, inTxCall{what: "recurrence " + r.Name, method: "recurrence.next", params: recurrenceParams(d, r.Name), result: &protocol.RecurrenceNextResult{}})
	}
	for _, k := range m.Provides.WorkKinds {
		if k.Trigger {
			out = append(out, inTxCall{what: "work kind " + k.Name, method: "work_kind.trigger", params: triggerParams(d, k.Name), result: &protocol.WorkKindTriggerResult{}})
		}
	}
	events := syntheticEvents(d)
	for _, o := range m.Provides.Operations {
		if o.DependencyFilter && len(events) > 0 {
			out = append(out, inTxCall{what: "operation " + o.Name, method: "dependency.filter", result: &protocol.DependencyFilterResult{},
				params: protocol.DependencyFilterParams{Operation: o.Name, Event: events[0],
					Wait: protocol.Wait{ID: "wait-certify", WorkID: "work-certify", Keys: []string{"certify"}, State: "open", CreatedAt: certifyNow}}})
		}
		if o.Commit {
			if p, ok := planEmit(ctx, d, o.Name, "certify-commit-"+o.Name); ok {
				out = append(out, inTxCall{what: "operation " + o.Name, method: "emit.commit", params: p, result: &protocol.EmitCommitResult{}})
			}
		}
	}
	return out
}

// planEmit plans an emission with operation.emit and returns the
// emit.commit the host would make once it accepted the Event.
func planEmit(ctx context.Context, d PackageDriver, op, requestID string) (protocol.EmitCommitParams, bool) {
	var o protocol.OperationDecl
	for _, x := range d.Manifest().Provides.Operations {
		if x.Name == op {
			o = x
		}
	}
	for _, in := range operationInputs(d, o) {
		var res protocol.OperationEmitResult
		if err := d.Call(ctx, "operation.emit", protocol.OperationEmitParams{Operation: op, RequestID: requestID,
			Input: in, Authority: authority(d)}, &res); err == nil {
			return protocol.EmitCommitParams{Operation: op, RequestID: requestID, Event: eventOf(d, res.Event, 1000), Commit: res.Commit}, true
		}
	}
	return protocol.EmitCommitParams{}, false
}

// InTransactionAttempts is how many times a deadline check makes each
// in-transaction call before it fails the package: the host too aborts a
// transaction whose call missed the deadline and retries it later, so one
// miss on a loaded machine is not a verdict, while a package that never
// answers in time misses every attempt.
var InTransactionAttempts = 3

// CheckPackageInTransactionDeadline makes each in-transaction call the
// manifest declares: each must answer within protocol.InTransactionDeadline
// (in one of InTransactionAttempts attempts) and never call the host while
// it runs, and, asked again with the same input, answer the same (the
// host may retry the transaction). A package left stuck in a call is
// restarted.
func CheckPackageInTransactionDeadline(ctx context.Context, d PackageDriver) error {
	calls := inTxCalls(ctx, d)
	var errs []error
	for _, o := range d.Manifest().Provides.Operations {
		if o.Commit && !slices.ContainsFunc(calls, func(c inTxCall) bool { return c.method == "emit.commit" && c.what == "operation "+o.Name }) {
			var tried []string
			for _, in := range operationInputs(d, o) {
				tried = append(tried, describeInput(in))
			}
			errs = append(errs, fmt.Errorf("operation %s: could not exercise: operation.emit refused every input (%s), so there was no emission for emit.commit to commit", o.Name, strings.Join(tried, "; ")))
		}
	}
	if len(calls) == 0 && len(errs) == 0 {
		return notApplicable("no in-transaction call could be made")
	}
	for _, c := range calls {
		var missed []time.Duration
		var answer json.RawMessage // the first in-time answer
		for range InTransactionAttempts {
			cctx, cancel := context.WithTimeout(ctx, protocol.InTransactionDeadline)
			var raw json.RawMessage
			t := observe(cctx, d, c.method, c.params, &raw)
			cancel()
			if cbs := callbacks(t.during); len(cbs) > 0 {
				errs = append(errs, fmt.Errorf("%s: %s called the host inside the transaction: %s", c.what, c.method, describeCallbacks(cbs)))
			}
			if t.err != nil && !errors.Is(t.err, context.DeadlineExceeded) && !serving(t.err) {
				errs = append(errs, fmt.Errorf("%s: %s: %w", c.what, c.method, t.err))
				break
			}
			if !errors.Is(t.err, context.DeadlineExceeded) && t.elapsed <= protocol.InTransactionDeadline {
				missed = nil
				answer = answerOf(raw, t.err)
				break
			}
			missed = append(missed, t.elapsed)
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			// It may still be stuck in the call: replace it, so the next
			// attempt and the next check find it serving.
			if err := d.Restart(ctx); err != nil {
				return errors.Join(append(errs, fmt.Errorf("restarting the package: %w", err))...)
			}
		}
		if len(missed) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s did not answer within the in-transaction deadline of %v in %d attempts",
				c.what, c.method, protocol.InTransactionDeadline, len(missed)))
			continue
		}
		// Pure and deterministic: the host may run the transaction again,
		// so the same input must get the same answer.
		var raw json.RawMessage
		err := d.Call(ctx, c.method, c.params, &raw)
		if again := answerOf(raw, err); !sameJSON(answer, again) {
			errs = append(errs, fmt.Errorf("%s: %s answered the same input differently: %s, then %s",
				c.what, c.method, clip(string(answer), 200), clip(string(again), 200)))
		}
	}
	return errors.Join(errs...)
}

// answerOf is a call's answer for comparing: its result, or its error code.
func answerOf(raw json.RawMessage, err error) json.RawMessage {
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", "error: "+protocol.CodeOf(err)))
	}
	return raw
}

// writtenSchemas lists each payload schema the wire shows the package
// writing: in its emissions, accepted Events, deliveries and timers, and
// in its answers that produce payloads (ingress observations, planned
// emissions, recurrence occurrences).
func writtenSchemas(msgs []wireMessage) (schemas []string, payloads int) {
	add := func(s string) {
		payloads++
		if s != "" {
			schemas = append(schemas, s)
		}
	}
	type drafts struct {
		Schema    string `json:"schema"`
		Emissions []struct {
			Schema string `json:"schema"`
		} `json:"emissions"`
		Events []struct {
			Schema string `json:"schema"`
		} `json:"events"`
		Event *struct {
			Schema string `json:"schema"`
		} `json:"event"`
		Observations []struct {
			Event struct {
				Schema string `json:"schema"`
			} `json:"event"`
		} `json:"observations"`
	}
	collect := func(raw json.RawMessage, draft bool) {
		var p drafts
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		if draft {
			add(p.Schema)
		}
		for _, e := range p.Emissions {
			add(e.Schema)
		}
		for _, e := range p.Events {
			add(e.Schema)
		}
		if p.Event != nil {
			add(p.Event.Schema)
		}
		for _, o := range p.Observations {
			add(o.Event.Schema)
		}
	}
	// The last request the host sent under each id, to pair answers.
	pending := map[string]string{}
	for _, m := range msgs {
		if !m.json {
			continue
		}
		switch {
		case m.fromExtension && m.request():
			switch m.Method {
			case "kv.commit", "ingress.deliver":
				collect(m.Params, false)
			case "event.accept", "timer.arm":
				collect(m.Params, true) // the params are one draft
			}
		case !m.fromExtension && m.request():
			pending[string(m.ID)] = m.Method
		case m.fromExtension && len(m.Result) > 0:
			switch pending[string(m.ID)] {
			case "ingress.push", "ingress.reconcile", "operation.emit", "recurrence.next":
				collect(m.Result, false)
			}
		}
	}
	return schemas, payloads
}

// CheckPackageSchemasCurrent exercises the package and checks every
// payload schema it wrote on the wire so far: each must be absent or the
// current version of one of its own schema bases. A package that wrote no
// payload while exercised gave nothing to check, and the check skips.
func CheckPackageSchemasCurrent(ctx context.Context, d PackageDriver) error {
	if err := exercise(ctx, d); err != nil {
		return err
	}
	m := d.Manifest()
	var errs []error
	seen := map[string]bool{}
	schemas, payloads := writtenSchemas(decodeWire(d.Wire(), 0))
	if payloads == 0 {
		return notApplicable("the package wrote no payload (no Event, emission, observation or timer) while certification exercised it")
	}
	for _, s := range schemas {
		if seen[s] {
			continue
		}
		seen[s] = true
		if err := m.CheckWrite(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckPackageEmissionsAtomic plans each emit operation's emission and
// commits its records: planning must write nothing (the records belong in
// the emission's transaction, through emit.commit), and emit.commit must
// call nothing on the host and name only the package's own namespaces.
func CheckPackageEmissionsAtomic(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	var errs []error
	checked := 0
	for _, o := range m.Provides.Operations {
		if o.Kind != protocol.OperationKindEmit {
			continue
		}
		checked++
		req := fmt.Sprintf("certify-atomic-%s-%d", o.Name, time.Now().UnixNano())
		var plan protocol.OperationEmitResult
		planned := false
		var refusals []string
		for n, in := range operationInputs(d, o) {
			req = fmt.Sprintf("certify-atomic-%s-%d-%d", o.Name, n, time.Now().UnixNano())
			c := observe(ctx, d, "operation.emit", protocol.OperationEmitParams{Operation: o.Name, RequestID: req,
				Input: in, Authority: authority(d)}, &plan)
			if w := writes(callbacks(c.during)); len(w) > 0 {
				errs = append(errs, atWire(w[0].index, fmt.Errorf("operation %s: planning the emission wrote outside the emission's transaction: %s", o.Name, describeCallbacks(w))))
			}
			if c.err == nil {
				planned = true
				break
			}
			refusals = append(refusals, fmt.Sprintf("input %s: %s", describeInput(in), clip(c.err.Error(), 160)))
		}
		if !planned {
			errs = append(errs, fmt.Errorf("operation %s: could not exercise: operation.emit refused every input: %s", o.Name, strings.Join(refusals, "; ")))
			continue
		}
		if !o.Commit {
			continue
		}
		var res protocol.EmitCommitResult
		t := observe(ctx, d, "emit.commit", protocol.EmitCommitParams{Operation: o.Name, RequestID: req,
			Event: eventOf(d, plan.Event, 2000), Commit: plan.Commit}, &res)
		if t.err != nil {
			errs = append(errs, fmt.Errorf("operation %s: emit.commit: %w", o.Name, t.err))
			continue
		}
		if cbs := callbacks(t.during); len(cbs) > 0 {
			errs = append(errs, fmt.Errorf("operation %s: emit.commit wrote through the host instead of its answer: %s", o.Name, describeCallbacks(cbs)))
		}
		for _, p := range res.Puts {
			if !protocol.Namespace(m.Name, p.Namespace) {
				errs = append(errs, fmt.Errorf("operation %s: emit.commit puts into namespace %q", o.Name, p.Namespace))
			}
		}
		for _, k := range res.Deletes {
			if !protocol.Namespace(m.Name, k.Namespace) {
				errs = append(errs, fmt.Errorf("operation %s: emit.commit deletes from namespace %q", o.Name, k.Namespace))
			}
		}
	}
	if checked == 0 {
		return notApplicable("the manifest declares no emit operation; kv.commit emissions are atomic by the host's construction")
	}
	return errors.Join(errs...)
}

// CheckPackageEmissionsIdempotent plans each emit operation twice with one
// request ID, and pushes one delivery twice to each ingress type: the same
// request or delivery must name the same Events (source and delivery ID),
// so the host accepts each once.
func CheckPackageEmissionsIdempotent(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	var errs []error
	checked := 0
	for _, o := range m.Provides.Operations {
		if o.Kind != protocol.OperationKindEmit {
			continue
		}
		var a, b protocol.OperationEmitResult
		var p protocol.OperationEmitParams
		var refusals []string
		planned := false
		for n, in := range operationInputs(d, o) {
			p = protocol.OperationEmitParams{Operation: o.Name, RequestID: fmt.Sprintf("certify-emit-%s-%d-%d", o.Name, n, time.Now().UnixNano()),
				Input: in, Authority: authority(d)}
			if err := d.Call(ctx, "operation.emit", p, &a); err != nil {
				refusals = append(refusals, fmt.Sprintf("input %s: %s", describeInput(in), clip(err.Error(), 160)))
				continue
			}
			planned = true
			break
		}
		if !planned {
			errs = append(errs, fmt.Errorf("operation %s: could not exercise: operation.emit refused every input: %s", o.Name, strings.Join(refusals, "; ")))
			continue
		}
		if err := d.Call(ctx, "operation.emit", p, &b); err != nil {
			errs = append(errs, fmt.Errorf("operation %s: operation.emit again: %w", o.Name, err))
			continue
		}
		checked++
		if a.Event.Source != b.Event.Source || a.Event.DeliveryID != b.Event.DeliveryID {
			errs = append(errs, fmt.Errorf("operation %s: the same request ID planned Event %s/%s, then %s/%s: the host would accept it twice",
				o.Name, a.Event.Source, a.Event.DeliveryID, b.Event.Source, b.Event.DeliveryID))
		}
	}
	ingress := map[string]bool{}
	for _, e := range m.Provides.Extensions {
		if e.Ingress {
			ingress[e.Type] = true
		}
	}
	if len(ingress) > 0 {
		for _, src := range registeredSources(d) {
			for typ := range ingress {
				for _, delivery := range deliveries(d, typ) {
					p := protocol.IngressPushParams{Type: typ, Source: src.Name, ScopeID: src.ScopeID, EntryID: "certify-" + typ, Delivery: delivery}
					var a, b protocol.IngressPushResult
					if d.Call(ctx, "ingress.push", p, &a) != nil || d.Call(ctx, "ingress.push", p, &b) != nil || len(a.Events) == 0 {
						continue // the package does not take this delivery; nothing to compare
					}
					checked++
					if ids(a) != ids(b) {
						errs = append(errs, fmt.Errorf("ingress %s: the same delivery to source %s observed Events %s, then %s", typ, src.Name, ids(a), ids(b)))
					}
				}
			}
		}
	}
	if checked == 0 && len(errs) == 0 {
		return notApplicable("no emit operation or ingress delivery gave an Event to compare")
	}
	return errors.Join(errs...)
}

// ids names the Events a push observed.
func ids(r protocol.IngressPushResult) string {
	var s string
	for _, e := range r.Events {
		s += e.Source + "/" + e.DeliveryID + " "
	}
	return s
}
