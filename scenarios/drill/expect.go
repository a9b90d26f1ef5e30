package drill

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/client"
)

// cmdAwait: await event|work|exec|package [--within D] [count=N]
// [FIELD=VALUE…] — waits on the daemon's change stream, from its first
// change, until N distinct Events (Works, Executions, packages) have had
// a change matching every field (count defaults to 1). It fails at the deadline, saying what it saw: never a
// sleep, never a poll.
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "await")
	s := state(ts)
	within := s.within
	if len(args) >= 3 && args[1] == "--within" {
		d, err := time.ParseDuration(args[2])
		if err != nil || d <= 0 {
			ts.Fatalf("await: --within %q is not a positive duration", args[2])
		}
		within = d
		args = append(args[:1:1], args[3:]...)
	}
	if len(args) >= 2 && args[0] == "log" {
		want := 1
		if len(args) == 3 {
			f := parseFilters(ts, "await log", args[1:2])
			want, args = f.count, []string{"log", args[2]}
		}
		if len(args) != 2 || want < 1 {
			ts.Fatalf("usage: await log [--within D] [count=N] REGEXP")
		}
		s.awaitLog(ts, args[1], want, within)
		return
	}
	if len(args) == 0 || !slices.Contains([]string{"event", "work", "exec", "package"}, args[0]) {
		ts.Fatalf("usage: await event|work|exec|package [--within D] [count=N] [FIELD=VALUE...] | await log [--within D] REGEXP")
	}
	kind := args[0]
	allowed := map[string][]string{"event": eventFields, "work": workChangeFields, "exec": execFields, "package": packageChangeFields}[kind]
	f := parseFilters(ts, "await "+kind, s.expandAll(args[1:]), allowed...)
	want := f.count
	if want < 0 {
		want = 1
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	seen := map[string]bool{}
	var recent []string // the last few changes, for a failure's message
	changes := 0
	_, err = c.WaitFor(ctx, client.ChangeQuery{}, func(ch client.Change) bool {
		changes++
		if recent = append(recent, describeChange(ch)); len(recent) > 5 {
			recent = recent[1:]
		}
		switch {
		case kind == "event" && ch.Event != nil && f.match(eventOf(*ch.Event)):
			seen[ch.Event.ID] = true
		case kind == "work" && ch.Work != nil && f.match(workOf(*ch.Work)):
			seen[ch.Work.ID] = true
		case kind == "exec" && ch.Execution != nil && f.match(execChangeOf(*ch.Execution)):
			seen[ch.Execution.ID] = true
		case kind == "package" && ch.Package != nil && f.match(packageChangeOf(*ch.Package)):
			seen[ch.Package.Name] = true
		}
		return len(seen) >= want
	})
	if err != nil {
		ts.Fatalf("await %s %s: %d of %d seen within %v (%d changes read): %v; the last changes:\n%s",
			kind, f, len(seen), want, within, changes, err, strings.Join(recent, "\n"))
	}
	s.progress("awaited %d %s (%s)", want, kind, f)
}

// cmdExpect: what the daemon holds now, read through its API —
//
//	expect event N [FIELD=VALUE…]   N Events in the log match
//	expect work N [FIELD=VALUE…]    N Works match
//	expect exec N [FIELD=VALUE…]    N Executions (of every Work) match
//	expect wait N [scope=ID]        N active Waits
//	expect kv PKG N [namespace=NS] [prefix=P]  N entries in PKG's KV
//	expect fired PKG N              PKG's fault rules fired N times in all
//	expect pass N [FIELD=VALUE…]    N background passes in status match
//	expect none                     no package process of the killed daemon is left
func cmdExpect(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "expect")
	s := state(ts)
	if len(args) == 0 {
		ts.Fatalf("usage: expect event|work|exec|wait N [FIELD=VALUE...] | expect kv PKG N [namespace=NS] [prefix=P] | expect none")
	}
	kind := args[0]
	if kind == "none" {
		if len(args) != 1 {
			ts.Fatalf("usage: expect none (no arguments)")
		}
		s.expectNoOrphans(ts)
		return
	}
	var pkg string
	if kind == "kv" || kind == "fired" {
		if len(args) < 3 {
			ts.Fatalf("usage: expect kv PKG N [namespace=NS] [prefix=P] | expect fired PKG N")
		}
		pkg, args = args[1], append(args[:1:1], args[2:]...)
	}
	if len(args) < 2 {
		ts.Fatalf("usage: expect %s N [FIELD=VALUE...]", kind)
	}
	want, err := parseCount(args[1])
	if err != nil {
		ts.Fatalf("expect %s: N: %v", kind, err)
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	words := s.expandAll(args[2:])
	var got []string
	var f filters
	switch kind {
	case "event":
		f = parseFilters(ts, "expect event", words, eventFields...)
		got, err = matchingEvents(ctx, c, f)
	case "work":
		f = parseFilters(ts, "expect work", words, workFields...)
		got, err = matchingWorks(ctx, c, f)
	case "exec":
		f = parseFilters(ts, "expect exec", words, execFields...)
		got, err = matchingExecutions(ctx, c, f)
	case "wait":
		f = parseFilters(ts, "expect wait", words, "scope")
		got, err = activeWaits(ctx, c, f.fields["scope"])
	case "pass":
		f = parseFilters(ts, "expect pass", words, passFields...)
		got, err = matchingPasses(ctx, c, f)
	case "fired":
		f = parseFilters(ts, "expect fired", words)
		got, err = firedFaults(ctx, c, pkg)
	case "kv":
		f = parseFilters(ts, "expect kv", words, "namespace", "prefix")
		got, err = kvKeys(ctx, c, client.KVQuery{Package: pkg, Namespace: f.fields["namespace"], Prefix: f.fields["prefix"]})
	default:
		ts.Fatalf("expect: unknown kind %q: want event, work, exec, wait, kv or none", kind)
	}
	ts.Check(err)
	listed := clipList(got)
	for _, g := range listed {
		fmt.Fprintln(ts.Stdout(), g)
	}
	if len(got) != want {
		ts.Fatalf("expect %s: %d match %s, want %d:\n%s", kind, len(got), f, want, strings.Join(listed, "\n"))
	}
}

// maxListed bounds what expect prints of what matched.
const maxListed = 20

func clipList(got []string) []string {
	if len(got) <= maxListed {
		return got
	}
	return append(got[:maxListed:maxListed], fmt.Sprintf("… and %d more", len(got)-maxListed))
}

func parseCount(word string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(word, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != word {
		return 0, fmt.Errorf("%q is not a count", word)
	}
	return n, nil
}

func (s *script) expandAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = s.expand(w)
	}
	return out
}

// matchingEvents pages the whole log and lists the Events f matches.
func matchingEvents(ctx context.Context, c *client.Client, f filters) ([]string, error) {
	var out []string
	var after int64
	for {
		page, err := c.Events(ctx, client.EventQuery{After: after, Limit: client.MaxPageLimit})
		if err != nil {
			return nil, err
		}
		for _, e := range page.Events {
			fields := eventOf(e)
			if _, ok := f.fields["route"]; ok {
				// Only a filter on it pays for each Event's route record.
				d, err := c.Event(ctx, e.ID)
				if err != nil {
					return nil, err
				}
				fields["route"] = "pending"
				if d.Route != nil {
					fields["route"] = d.Route.Disposition
				}
			}
			if f.match(fields) {
				out = append(out, fmt.Sprintf("event %d %s %s/%s", e.Sequence, e.ID, e.Source, e.DeliveryID))
			}
		}
		if page.Next == 0 {
			return out, nil
		}
		after = page.Next
	}
}

func allWorks(ctx context.Context, c *client.Client) ([]client.Work, error) {
	var out []client.Work
	after := ""
	for {
		page, err := c.Works(ctx, client.WorkQuery{After: after, Limit: client.MaxPageLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Works...)
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func matchingWorks(ctx context.Context, c *client.Client, f filters) ([]string, error) {
	works, err := allWorks(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range works {
		if f.match(workOf(w)) {
			out = append(out, fmt.Sprintf("work %s %s kind=%s", w.ID, w.State, w.Kind))
		}
	}
	return out, nil
}

func matchingExecutions(ctx context.Context, c *client.Client, f filters) ([]string, error) {
	works, err := allWorks(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range works {
		xs, err := c.Executions(ctx, w.ID)
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			if f.match(execOf(x)) {
				out = append(out, fmt.Sprintf("exec %s work=%s attempt=%d epoch=%d %s %s", x.ID, x.WorkID, x.Attempt, x.Epoch, x.State, x.Error))
			}
		}
	}
	return out, nil
}

func activeWaits(ctx context.Context, c *client.Client, scope string) ([]string, error) {
	var out []string
	after := ""
	for {
		page, err := c.Waits(ctx, client.WaitQuery{Scope: scope, After: after, Limit: client.MaxPageLimit})
		if err != nil {
			return nil, err
		}
		for _, w := range page.Waits {
			out = append(out, fmt.Sprintf("wait %s work=%s %s", w.ID, w.WorkID, w.State))
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

func kvKeys(ctx context.Context, c *client.Client, q client.KVQuery) ([]string, error) {
	var out []string
	q.Limit = client.MaxPageLimit
	for {
		page, err := c.KV(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			out = append(out, fmt.Sprintf("kv %s %s", e.Key, e.Value))
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

// expectNoOrphans: every package process the last `daemon kill` left has
// exited (they read EOF on stdin and end), within the deadline.
func (s *script) expectNoOrphans(ts *testscript.TestScript) {
	if s.orphans == nil {
		ts.Fatalf("expect none: no daemon kill recorded package processes (daemon kill first)")
	}
	var errs []error
	for _, p := range s.orphans {
		if err := waitGone(p.PID, s.within); err != nil {
			s.leftover = append(s.leftover, p.PID)
			errs = append(errs, fmt.Errorf("package %s: %w", p.Name, err))
			continue
		}
		fmt.Fprintf(ts.Stdout(), "%s (pid %d) exited\n", p.Name, p.PID)
	}
	if err := errors.Join(errs...); err != nil {
		ts.Fatalf("expect none: orphans of the killed daemon: %v", err)
	}
}

func describeChange(ch client.Change) string {
	switch {
	case ch.Event != nil:
		return fmt.Sprintf("%d event %s %s/%s", ch.Seq, ch.Event.ID, ch.Event.Source, ch.Event.DeliveryID)
	case ch.Work != nil:
		return fmt.Sprintf("%d work %s %s kind=%s", ch.Seq, ch.Work.ID, ch.Work.State, ch.Work.Kind)
	case ch.Execution != nil:
		x := ch.Execution
		return fmt.Sprintf("%d.%d exec %s work=%s attempt=%d epoch=%d %s", ch.Seq, ch.Journal, x.ID, x.WorkID, x.Attempt, x.Epoch, x.State)
	case ch.Package != nil:
		p := ch.Package
		return fmt.Sprintf("%d.%d package %s %s pid=%d restarts=%d", ch.Seq, ch.Journal, p.Name, p.State, p.PID, p.Restarts)
	}
	return fmt.Sprintf("%d %s", ch.Seq, ch.Kind)
}

// awaitLog waits until the running daemon's log (since its start) holds
// want matches of the regular expression, woken by each write to it.
func (s *script) awaitLog(ts *testscript.TestScript, expr string, want int, within time.Duration) {
	re, err := regexp.Compile(expr)
	if err != nil {
		ts.Fatalf("await log: %v", err)
	}
	d, err := s.running()
	ts.Check(err)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		text, changed := d.stderr.snapshot()
		if len(re.FindAllStringIndex(text, -1)) >= want {
			s.progress("the daemon logged %s", expr)
			return
		}
		select {
		case <-changed:
		case <-d.exited:
			if text, _ := d.stderr.snapshot(); len(re.FindAllStringIndex(text, -1)) >= want {
				return
			}
			ts.Fatalf("await log: the daemon exited without logging %q %d times", expr, want)
		case <-deadline.C:
			ts.Fatalf("await log: the daemon did not log %q %d times within %v", expr, want, within)
		}
	}
}

var passFields = []string{"kind", "name", "package", "runs", "failures"}

func matchingPasses(ctx context.Context, c *client.Client, f filters) ([]string, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range st.Passes {
		fields := map[string]string{"kind": p.Kind, "name": p.Name, "package": p.Package,
			"runs": strconv.FormatInt(p.Runs, 10), "failures": strconv.FormatInt(p.Failures, 10)}
		if f.match(fields) {
			out = append(out, fmt.Sprintf("pass %s %s of %s: runs=%d failures=%d %s", p.Kind, p.Name, p.Package, p.Runs, p.Failures, p.LastError))
		}
	}
	return out, nil
}
