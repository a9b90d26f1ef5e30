package extensiontest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// Check is one expectation of a step. The constructors below make them;
// ExpectThat makes one of any condition. A step waits, on the daemon's
// change stream, until every check holds or its timeout passes; then the
// negative checks (ExpectNoEvent, ExpectNoOtherEvent) are held once.
type Check interface {
	// String is what the check expects, in words.
	String() string
	// eval says what was found and whether it is what the check expects.
	eval(ctx context.Context, v *view) (found string, ok bool, err error)
}

// negative marks the checks held once the others hold: that something
// did not happen can only be said at a moment, not waited for.
type negative interface{ negative() }

// view is what a step's checks look at: the daemon, and the Events the
// step's changes brought.
type view struct {
	h      *H
	events []client.Event
	// matched are the step's event matchers, for ExpectNoOtherEvent.
	matched []EventMatch
}

// EventMatch selects Events: every field set must match (Payload: the
// payload holds every member it names, recursively).
type EventMatch struct {
	Source, Family, Type, Schema string
	Payload                      any
	// Count is how many Events of the step must match: 0 means at least
	// one.
	Count int
}

func (m EventMatch) String() string {
	var parts []string
	for _, f := range [][2]string{{"source", m.Source}, {"family", m.Family}, {"type", m.Type}, {"schema", m.Schema}} {
		if f[1] != "" {
			parts = append(parts, f[0]+"="+f[1])
		}
	}
	if m.Payload != nil {
		p, _ := json.Marshal(m.Payload)
		parts = append(parts, "payload⊇"+string(p))
	}
	if len(parts) == 0 {
		return "any event"
	}
	return strings.Join(parts, " ")
}

func (m EventMatch) matches(e client.Event) bool {
	if (m.Source != "" && e.Source != m.Source) || (m.Family != "" && e.Family != m.Family) ||
		(m.Type != "" && e.Type != m.Type) || (m.Schema != "" && e.Schema != m.Schema) {
		return false
	}
	if m.Payload == nil {
		return true
	}
	return holdsJSON(m.Payload, e.Payload)
}

// ExpectEvent expects Events accepted during the step that match m.
func ExpectEvent(m EventMatch) Check { return eventCheck{m} }

type eventCheck struct{ m EventMatch }

func (c eventCheck) String() string {
	if c.m.Count > 0 {
		return fmt.Sprintf("%d events of this step with %s", c.m.Count, c.m)
	}
	return "an event of this step with " + c.m.String()
}

func (c eventCheck) eval(_ context.Context, v *view) (string, bool, error) {
	n := 0
	for _, e := range v.events {
		if c.m.matches(e) {
			n++
		}
	}
	ok := n > 0
	if c.m.Count > 0 {
		ok = n == c.m.Count
	}
	return fmt.Sprintf("%d matching of the step's %d events%s", n, len(v.events), eventList(v.events)), ok, nil
}

// ExpectNoEvent expects that no Event accepted during the step matches m
// (the zero EventMatch: no Event at all).
func ExpectNoEvent(m EventMatch) Check { return noEventCheck{m} }

type noEventCheck struct{ m EventMatch }

func (noEventCheck) negative() {}
func (c noEventCheck) String() string {
	return "no event of this step with " + c.m.String()
}

func (c noEventCheck) eval(_ context.Context, v *view) (string, bool, error) {
	var hits []client.Event
	for _, e := range v.events {
		if c.m.matches(e) {
			hits = append(hits, e)
		}
	}
	return fmt.Sprintf("%d matching events%s", len(hits), eventList(hits)), len(hits) == 0, nil
}

// ExpectNoOtherEvent expects that every Event accepted during the step is
// matched by one of the step's ExpectEvent checks: nothing else happened.
func ExpectNoOtherEvent() Check { return noOtherCheck{} }

type noOtherCheck struct{}

func (noOtherCheck) negative()      {}
func (noOtherCheck) String() string { return "no event of this step but those the step expects" }

func (noOtherCheck) eval(_ context.Context, v *view) (string, bool, error) {
	var others []client.Event
	for _, e := range v.events {
		if !slices.ContainsFunc(v.matched, func(m EventMatch) bool { return m.matches(e) }) {
			others = append(others, e)
		}
	}
	return fmt.Sprintf("%d other events%s", len(others), eventList(others)), len(others) == 0, nil
}

func eventList(evs []client.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i == 10 {
			fmt.Fprintf(&b, "\n  … %d more", len(evs)-i)
			break
		}
		fmt.Fprintf(&b, "\n  #%d source=%s family=%s type=%s payload=%s", e.Sequence, e.Source, e.Family, e.Type, clipString(string(e.Payload), 200))
	}
	return b.String()
}

// WorkMatch selects Work of the case's scope: every field set must match
// (Title: the display's title; Context: the Work's context holds every
// member it names).
type WorkMatch struct {
	Kind, State, Binding, Title string
	Context                     any
	// Count is how many Work must match: 0 means at least one.
	Count int
}

func (m WorkMatch) String() string {
	var parts []string
	for _, f := range [][2]string{{"kind", m.Kind}, {"state", m.State}, {"binding", m.Binding}, {"title", m.Title}} {
		if f[1] != "" {
			parts = append(parts, f[0]+"="+f[1])
		}
	}
	if m.Context != nil {
		p, _ := json.Marshal(m.Context)
		parts = append(parts, "context⊇"+string(p))
	}
	if len(parts) == 0 {
		return "any work"
	}
	return strings.Join(parts, " ")
}

func (m WorkMatch) matches(w client.Work) bool {
	title := ""
	if w.Display != nil {
		title = w.Display.Title
	}
	if (m.Kind != "" && w.Kind != m.Kind) || (m.State != "" && w.State != m.State) ||
		(m.Binding != "" && w.Binding != m.Binding) || (m.Title != "" && title != m.Title) {
		return false
	}
	return m.Context == nil || holdsJSON(m.Context, w.Context)
}

// ExpectWork expects Work of the scope, as it stands, that matches m.
func ExpectWork(m WorkMatch) Check { return workCheck{m} }

type workCheck struct{ m WorkMatch }

func (c workCheck) String() string {
	if c.m.Count > 0 {
		return fmt.Sprintf("%d work with %s", c.m.Count, c.m)
	}
	return "work with " + c.m.String()
}

func (c workCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	works, err := v.h.works(ctx)
	if err != nil {
		return "", false, err
	}
	n := 0
	var b strings.Builder
	for i, w := range works {
		if c.m.matches(w) {
			n++
		}
		if i < 10 {
			title := ""
			if w.Display != nil {
				title = w.Display.Title
			}
			fmt.Fprintf(&b, "\n  %s kind=%s binding=%s state=%s title=%q context=%s", w.ID, w.Kind, w.Binding, w.State, title, clipString(string(w.Context), 200))
		}
	}
	ok := n > 0
	if c.m.Count > 0 {
		ok = n == c.m.Count
	}
	return fmt.Sprintf("%d matching of %d work%s", n, len(works), b.String()), ok, nil
}

// works lists the scope's Work, every page.
func (h *H) works(ctx context.Context) ([]client.Work, error) {
	var out []client.Work
	q := client.WorkQuery{Scope: Scope, Limit: client.MaxPageLimit}
	for {
		page, err := h.d.client.Works(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Works...)
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

// WaitMatch selects active Waits of the scope: every field set must match.
type WaitMatch struct {
	Description, Progress, Target string
	// Count is how many Waits must match: 0 means at least one.
	Count int
}

// ExpectWait expects active Waits of the scope that match m.
func ExpectWait(m WaitMatch) Check { return waitCheck{m} }

type waitCheck struct{ m WaitMatch }

func (c waitCheck) String() string {
	return fmt.Sprintf("an active wait with description=%q progress=%q target=%q (count %d, 0: at least one)",
		c.m.Description, c.m.Progress, c.m.Target, c.m.Count)
}

func (c waitCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	var waits []client.Wait
	q := client.WaitQuery{Scope: Scope, Limit: client.MaxPageLimit}
	for {
		page, err := v.h.d.client.Waits(ctx, q)
		if err != nil {
			return "", false, err
		}
		waits = append(waits, page.Waits...)
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	n := 0
	var b strings.Builder
	for _, w := range waits {
		if (c.m.Description == "" || w.Description == c.m.Description) && (c.m.Progress == "" || w.Progress == c.m.Progress) &&
			(c.m.Target == "" || w.Target == c.m.Target) {
			n++
		}
		fmt.Fprintf(&b, "\n  work %s: description=%q progress=%q target=%q", w.WorkID, w.Description, w.Progress, w.Target)
	}
	ok := n > 0
	if c.m.Count > 0 {
		ok = n == c.m.Count
	}
	return fmt.Sprintf("%d matching of %d active waits%s", n, len(waits), b.String()), ok, nil
}

// ExpectKV expects the KV entry namespace/key to be present, holding
// value (every member it names, recursively; nil: any value). The
// namespace's package is its name up to the first dot.
func ExpectKV(namespace, key string, value any) Check {
	return kvCheck{namespace: namespace, key: key, value: value}
}

// ExpectNoKV expects the KV entry namespace/key to be absent.
func ExpectNoKV(namespace, key string) Check {
	return kvCheck{namespace: namespace, key: key, absent: true}
}

type kvCheck struct {
	namespace, key string
	value          any
	absent         bool
}

func (c kvCheck) String() string {
	switch {
	case c.absent:
		return fmt.Sprintf("no KV entry %s/%s", c.namespace, c.key)
	case c.value == nil:
		return fmt.Sprintf("a KV entry %s/%s", c.namespace, c.key)
	}
	v, _ := json.Marshal(c.value)
	return fmt.Sprintf("the KV entry %s/%s holding %s", c.namespace, c.key, v)
}

func (c kvCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	pkg, _, _ := strings.Cut(c.namespace, ".")
	page, err := v.h.d.client.KV(ctx, client.KVQuery{Package: pkg, Namespace: c.namespace, Prefix: c.key, Limit: 1})
	if err != nil {
		return "", false, err
	}
	if len(page.Entries) == 0 || page.Entries[0].Key != c.key {
		return "no such entry", c.absent, nil
	}
	got := page.Entries[0]
	found := fmt.Sprintf("the entry holds %s", clipString(string(got.Value), 500))
	if c.absent {
		return found, false, nil
	}
	return found, c.value == nil || holdsJSON(c.value, got.Value), nil
}

// ExpectDoctor expects the doctor check named name (a daemon check such
// as "store", or a package's) to end with status (client.CheckOK …).
func ExpectDoctor(name, status string) Check { return doctorCheck{name, status} }

type doctorCheck struct{ name, status string }

func (c doctorCheck) String() string { return fmt.Sprintf("doctor check %s %s", c.name, c.status) }

func (c doctorCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	rep, err := v.h.d.client.Doctor(ctx, false)
	if err != nil {
		return "", false, err
	}
	var names []string
	for _, ch := range rep.Checks {
		if ch.Name == c.name {
			return fmt.Sprintf("doctor check %s %s: %s %s", ch.Name, ch.Status, ch.Code, ch.Detail), ch.Status == c.status, nil
		}
		names = append(names, ch.Name)
	}
	return fmt.Sprintf("no doctor check %s (checks: %s)", c.name, strings.Join(names, ", ")), false, nil
}

// ExpectConfigWarning expects the running configuration, validated again,
// to draw a package's warning at path (a JSON path such as
// "$.scopes[0].entries[0]") whose message contains text.
func ExpectConfigWarning(path, text string) Check { return warningCheck{path: path, text: text} }

// ExpectNoConfigWarning expects no warning about the running
// configuration.
func ExpectNoConfigWarning() Check { return warningCheck{none: true} }

type warningCheck struct {
	path, text string
	none       bool
}

func (c warningCheck) String() string {
	if c.none {
		return "no configuration warning"
	}
	return fmt.Sprintf("a configuration warning at %s saying %q", c.path, c.text)
}

func (c warningCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	doc, err := json.Marshal(v.h.cfg)
	if err != nil {
		return "", false, err
	}
	res, err := v.h.d.client.ValidateConfig(ctx, doc)
	if err != nil {
		return "", false, err
	}
	found := fmt.Sprintf("%d warnings", len(res.Warnings))
	if len(res.Warnings) > 0 {
		found += ":\n" + diagnosticLines(res.Warnings)
	}
	if c.none {
		return found, len(res.Warnings) == 0, nil
	}
	for _, w := range res.Warnings {
		if w.Path == c.path && strings.Contains(w.Message, c.text) {
			return found, true, nil
		}
	}
	return found, false, nil
}

// ExpectThat is a check of any condition: cond says what it found and
// whether that holds. It is evaluated again at each change until it holds.
func ExpectThat(what string, cond func(ctx context.Context, h *H) (found string, ok bool, err error)) Check {
	return funcCheck{what, cond}
}

type funcCheck struct {
	what string
	cond func(ctx context.Context, h *H) (string, bool, error)
}

func (c funcCheck) String() string { return c.what }
func (c funcCheck) eval(ctx context.Context, v *view) (string, bool, error) {
	return c.cond(ctx, v.h)
}

// await holds the step's checks: the positive ones until they all hold,
// re-evaluated at each change on the stream after mark, then the negative
// ones once.
func (h *H) await(ctx context.Context, mark int64, checks []Check) *StepError {
	if len(checks) == 0 {
		return nil
	}
	var positive, negatives []Check
	var matched []EventMatch
	for _, c := range checks {
		if _, ok := c.(negative); ok {
			negatives = append(negatives, c)
			continue
		}
		positive = append(positive, c)
		if ec, ok := c.(eventCheck); ok {
			matched = append(matched, ec.m)
		}
	}
	col := h.collect(ctx, mark)
	defer col.stop()
	start := time.Now()
	for {
		changed := col.changedChan()
		v := &view{h: h, events: col.snapshot(), matched: matched}
		var failing Check
		var found string
		for _, c := range positive {
			f, ok, err := c.eval(ctx, v)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return &StepError{Expected: c.String(), Found: "the check could not read the daemon: " + err.Error()}
			}
			if !ok {
				failing, found = c, f
				break
			}
		}
		if failing == nil && ctx.Err() == nil {
			for _, c := range negatives {
				f, ok, err := c.eval(ctx, v)
				if err != nil {
					return &StepError{Expected: c.String(), Found: "the check could not read the daemon: " + err.Error()}
				}
				if !ok {
					return &StepError{Expected: c.String(), Found: f}
				}
			}
			return nil
		}
		if failing == nil {
			failing, found = positive[0], "(the step's time ran out while checking)"
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if err := col.failure(); err != nil {
				found += "\n(the change stream failed: " + err.Error() + ")"
			}
			return &StepError{Expected: failing.String(), Found: fmt.Sprintf("%s\n(after waiting %s for it on the change stream)", found,
				time.Since(start).Round(time.Millisecond))}
		}
	}
}

// collector reads the change stream after a mark in the background:
// the step's Events, and a signal at every change.
type collector struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []client.Event
	changed chan struct{} // closed at the next change, then replaced
	err     error
}

func (h *H) collect(ctx context.Context, mark int64) *collector {
	ctx, cancel := context.WithCancel(ctx)
	col := &collector{cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		defer close(col.done)
		after := mark
		for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
			stream, err := h.d.client.Changes(ctx, client.ChangeQuery{After: after})
			if err != nil {
				if ctx.Err() == nil {
					col.fail(err)
				}
				continue
			}
			for {
				ch, err := stream.Next()
				if err != nil {
					after = stream.Last()
					stream.Close()
					if ctx.Err() == nil { // the step's end is no failure of the stream
						col.fail(err)
					}
					break
				}
				attempt = 0
				if ch.Event != nil {
					h.Logf("change %d: event #%d %s %s/%s", ch.Seq, ch.Event.Sequence, ch.Event.Source, ch.Event.Family, ch.Event.Type)
				}
				if ch.Work != nil {
					h.Logf("change %d: work %s %s (revision %d)", ch.Seq, ch.Work.ID, ch.Work.State, ch.Work.Revision)
				}
				col.add(ch)
			}
		}
	}()
	return col
}

func (c *collector) add(ch client.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.Event != nil {
		c.events = append(c.events, *ch.Event)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *collector) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *collector) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *collector) changedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *collector) snapshot() []client.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func (c *collector) stop() {
	c.cancel()
	<-c.done
}

// holdsJSON reports whether the JSON got holds want (a Go value marshalled
// to JSON): every member of an object want names, recursively; arrays of
// the same length element by element; other values equal.
func holdsJSON(want any, got json.RawMessage) bool {
	wb, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var w, g any
	if json.Unmarshal(wb, &w) != nil || json.Unmarshal(got, &g) != nil {
		return false
	}
	return holds(w, g)
}

func holds(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, present := g[k]
			if !present || !holds(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !holds(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return want == got
}

func clipString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
