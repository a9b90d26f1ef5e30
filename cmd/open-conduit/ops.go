package main

// The operator commands: each reads or drives a running daemon through its
// management API (package client) and prints a readable table, or with
// --json the API's answer as it came.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// opsFlagsHelp documents the flags every operator command takes.
const opsFlagsHelp = `  --state DIR	the daemon's state directory (default $XDG_STATE_HOME/open-conduit,
		else ~/.local/state/open-conduit); its API socket is DIR/api.sock
  --socket PATH	the API socket itself (overrides --state)
  --json	print the API's answer as JSON
`

// opsExitHelp says how an operator command exits.
const opsExitHelp = `Exit status: 0 on success, 1 when the daemon refused or cannot be reached,
2 for a usage error.
`

// opsFile bounds a file an operator command sends (a config, an Event).
const opsFile = 4 << 20

// opsCommand is the shared part of an operator command: its flags, the
// client, the output.
type opsCommand struct {
	name          string
	fs            *flag.FlagSet
	state, socket string
	json          bool
	// args are the positional arguments, after parse.
	args           []string
	stdout, stderr io.Writer
}

func newOps(name string, stdout, stderr io.Writer) *opsCommand {
	o := &opsCommand{name: name, stdout: stdout, stderr: stderr, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	o.fs.SetOutput(io.Discard)
	o.fs.StringVar(&o.state, "state", "", "state directory")
	o.fs.StringVar(&o.socket, "socket", "", "API socket")
	o.fs.BoolVar(&o.json, "json", false, "print JSON")
	return o
}

// parse parses args and wants exactly nargs positional arguments (-1: at
// most one). A failure is reported and returns false.
func (o *opsCommand) parse(args []string, minArgs, maxArgs int) bool {
	// Flags may follow the arguments (config apply FILE --state DIR): parse
	// up to each argument, keep it, and go on after it.
	var positional []string
	for {
		if err := o.fs.Parse(args); err != nil {
			o.usage("%v", err)
			return false
		}
		rest := o.fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	o.args = positional
	if n := len(o.args); n < minArgs || n > maxArgs {
		switch {
		case maxArgs == 0:
			o.usage("takes no arguments, got %q", o.args)
		case n < minArgs:
			o.usage("missing argument")
		default:
			o.usage("too many arguments: %q", o.args)
		}
		return false
	}
	return true
}

func (o *opsCommand) usage(format string, args ...any) {
	fmt.Fprintf(o.stderr, "open-conduit %s: %s\nRun \"open-conduit %s --help\" for usage.\n", o.name, fmt.Sprintf(format, args...), o.name)
}

// socketPath is the API socket the command dials: --socket, else the state
// directory's (the same XDG default as serve).
func (o *opsCommand) socketPath() (string, error) {
	if o.socket != "" {
		return o.socket, nil
	}
	state := o.state
	if state == "" {
		var err error
		if state, err = defaultStateDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(state, client.SocketName), nil
}

// client returns a client of the daemon, or reports why there is none.
func (o *opsCommand) client() (*client.Client, bool) {
	sock, err := o.socketPath()
	if err != nil {
		o.fail(err)
		return nil, false
	}
	if _, err := os.Stat(sock); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(o.stderr, "open-conduit %s: no daemon runs here: %s does not exist (start one with `open-conduit serve`, or pass --state or --socket)\n", o.name, sock)
		return nil, false
	}
	return client.New(sock), true
}

// call dials the daemon and runs fn with the client and the command's
// context, returning fn's exit status; without a daemon it has reported
// why and returns exitFail.
func (o *opsCommand) call(fn func(ctx context.Context, c *client.Client) int) int {
	c, ok := o.client()
	if !ok {
		return exitFail
	}
	defer c.Close()
	ctx, cancel := opsContext()
	defer cancel()
	return fn(ctx, c)
}

// fail reports err and returns the failure exit status. A configuration
// refusal lists every diagnostic.
func (o *opsCommand) fail(err error) int {
	fmt.Fprintf(o.stderr, "open-conduit %s: %v\n", o.name, err)
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		printDiagnostics(o.stderr, apiErr.Diagnostics)
	}
	return exitFail
}

// printDiagnostics lists configuration diagnostics one a line, as every
// command that checks a configuration prints them.
func printDiagnostics(w io.Writer, ds []client.Diagnostic) {
	for _, d := range ds {
		fmt.Fprintf(w, "  %s: %s: %s\n", d.Path, d.Rule, d.Message)
	}
}

// printWarnings lists the packages' warnings about objects they accepted
// (rule package_warning) under a heading, as printDiagnostics does.
func printWarnings(w io.Writer, ws []client.Diagnostic) {
	if len(ws) == 0 {
		return
	}
	fmt.Fprintf(w, "warnings (%d):\n", len(ws))
	printDiagnostics(w, ws)
}

// print writes v as JSON with --json, or the table text renders.
func (o *opsCommand) print(v any, table func(w *tabwriter.Writer)) int {
	if o.json {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return o.fail(err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	if err := tw.Flush(); err != nil {
		return o.fail(err)
	}
	return exitOK
}

// defaultStateDir is serve's default state directory (defaultDirs).
func defaultStateDir() (string, error) {
	_, state, err := defaultDirs(os.Getenv)
	if err != nil {
		return "", fmt.Errorf("no state directory: pass --state or --socket: %w", err)
	}
	return state, nil
}

// readInputFile reads a file an operator command sends, bounded.
func readInputFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, opsFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > opsFile {
		return nil, fmt.Errorf("%s is over %d bytes", path, opsFile)
	}
	return data, nil
}

// opsContext is what an operator command runs under: it ends on SIGINT or
// SIGTERM (the way events --follow ends). Tests replace it.
var opsContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table cell on one line and bounded.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// ---- status ----

func statusCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("status", stdout, stderr)
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		st, err := c.Status(ctx)
		if err != nil {
			return o.fail(err)
		}
		return o.print(st, func(w *tabwriter.Writer) {
			ready := "no"
			if st.Ready {
				ready = "yes"
			}
			fmt.Fprintf(w, "daemon\t%s (pid %d, protocol %v)\n", orDash(st.DaemonVersion), st.PID, st.ProtocolVersions)
			fmt.Fprintf(w, "ready\t%s\n", ready)
			fmt.Fprintf(w, "generation\t%d %s applied %s\n", st.Generation.Number, orDash(st.Generation.Hash), stamp(st.Generation.AppliedAt))
			fmt.Fprintf(w, "socket\t%s\n", st.Paths.Socket)
			fmt.Fprintf(w, "webhooks\t%s\n", orDash(st.Paths.Webhook))
			fmt.Fprintf(w, "logs\t%s\n", st.Paths.Logs)
			fmt.Fprintf(w, "state\t%s\n", st.Paths.State)
			fmt.Fprintf(w, "config\t%s\n", st.Paths.Config)
			fmt.Fprintf(w, "packages\t%d\n", len(st.Packages))
			for _, p := range st.Packages {
				fmt.Fprintf(w, "  %s\t%s %s, %s, restarts %d%s\n", p.Name, p.Version, p.State, p.Origin, p.Restarts, lastError(p))
			}
			fmt.Fprintf(w, "passes\t%d\n", len(st.Passes))
			for _, p := range st.Passes {
				last := ""
				if p.LastError != "" {
					last = ", last error: " + oneLine(p.LastError, 120)
				}
				fmt.Fprintf(w, "  %s %s\t%s, every %s: %d runs, %d failed, %d overran, next %s%s\n", p.Kind, p.Name, p.Package,
					p.Interval, p.Runs, p.Failures, p.Overruns, stamp(p.Next), last)
			}
		})
	})
}

func lastError(p client.Package) string {
	if p.LastError == "" {
		return ""
	}
	return ", last error: " + oneLine(p.LastError, 120)
}

// ---- events ----

func eventsCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("events", stdout, stderr)
	var q client.EventQuery
	var follow bool
	o.fs.StringVar(&q.Scope, "scope", "", "scope")
	o.fs.Int64Var(&q.After, "after", 0, "after sequence")
	o.fs.IntVar(&q.Limit, "limit", client.DefaultPageLimit, "page limit")
	o.fs.BoolVar(&follow, "follow", false, "follow")
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	if q.Limit < 1 || q.Limit > client.MaxPageLimit {
		o.usage("--limit %d is not between 1 and %d", q.Limit, client.MaxPageLimit)
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		page, err := c.Events(ctx, q)
		if err != nil {
			return o.fail(err)
		}
		if !follow {
			return o.print(page, func(w *tabwriter.Writer) {
				eventHeader(w)
				for _, e := range page.Events {
					eventRow(w, e)
				}
				if page.Next != 0 {
					fmt.Fprintf(w, "(more: --after %d)\n", page.Next)
				}
			})
		}
		return o.followEvents(ctx, c, q, page)
	})
}

// followEvents prints the log from q.After and then every new Event as it
// is accepted: it pages to the end, then follows the change stream after
// the last page's LatestChange, so no Event falls between the two.
func (o *opsCommand) followEvents(ctx context.Context, c *client.Client, q client.EventQuery, page client.EventPage) int {
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	enc := json.NewEncoder(o.stdout)
	last := q.After
	emit := func(e client.Event) {
		if e.Sequence <= last {
			return
		}
		last = e.Sequence
		if o.json {
			_ = enc.Encode(e) // one JSON object per line
			return
		}
		eventRow(tw, e)
		_ = tw.Flush()
	}
	if !o.json {
		eventHeader(tw)
	}
	for {
		for _, e := range page.Events {
			emit(e)
		}
		if page.Next == 0 {
			break
		}
		q.After = page.Next
		var err error
		if page, err = c.Events(ctx, q); err != nil {
			return o.fail(err)
		}
	}
	_, err := c.WaitFor(ctx, client.ChangeQuery{After: page.LatestChange, Scope: q.Scope}, func(ch client.Change) bool {
		if ch.Event != nil {
			emit(*ch.Event)
		}
		return false
	})
	if errors.Is(err, context.Canceled) {
		return exitOK // interrupted: the way a follow ends
	}
	return o.fail(err)
}

func eventHeader(w io.Writer) {
	fmt.Fprintln(w, "SEQ\tACCEPTED\tSCOPE\tSOURCE\tFAMILY/TYPE\tID")
}

func eventRow(w io.Writer, e client.Event) {
	kind := e.Family
	if e.Type != "" {
		kind += "/" + e.Type
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Sequence, stamp(e.AcceptedAt), orDash(e.ScopeID), e.Source, orDash(kind), e.ID)
}

// ---- work, waits ----

func workCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("work", stdout, stderr)
	var q client.WorkQuery
	o.fs.StringVar(&q.Scope, "scope", "", "scope")
	o.fs.StringVar(&q.State, "work-state", "", "work state")
	o.fs.StringVar(&q.After, "after", "", "after work ID")
	o.fs.IntVar(&q.Limit, "limit", client.DefaultPageLimit, "page limit")
	if !o.parse(args, 0, 1) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		if len(o.args) == 1 {
			d, err := c.Work(ctx, o.args[0])
			if err != nil {
				return o.fail(err)
			}
			return o.print(d, func(w *tabwriter.Writer) { workDetail(w, d) })
		}
		page, err := c.Works(ctx, q)
		if err != nil {
			return o.fail(err)
		}
		return o.print(page, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "ID\tSCOPE\tKIND\tSTATE\tUPDATED\tTITLE")
			for _, wk := range page.Works {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", wk.ID, wk.ScopeID, orDash(wk.Kind), wk.State, stamp(wk.UpdatedAt), orDash(title(wk)))
			}
			if page.Next != "" {
				fmt.Fprintf(w, "(more: --after %s)\n", page.Next)
			}
		})
	})
}

func title(wk client.Work) string {
	if wk.Display == nil {
		return ""
	}
	t := wk.Display.Title
	if wk.Display.Ref != "" {
		t = strings.TrimSpace(wk.Display.Ref + " " + t)
	}
	return oneLine(t, 80)
}

func workDetail(w *tabwriter.Writer, d client.WorkDetail) {
	wk := d.Work
	fmt.Fprintf(w, "work\t%s\n", wk.ID)
	fmt.Fprintf(w, "scope\t%s\n", wk.ScopeID)
	fmt.Fprintf(w, "kind\t%s\n", orDash(wk.Kind))
	fmt.Fprintf(w, "binding\t%s\n", orDash(wk.Binding))
	fmt.Fprintf(w, "state\t%s (revision %d)\n", wk.State, wk.Revision)
	fmt.Fprintf(w, "created\t%s\n", stamp(wk.CreatedAt))
	fmt.Fprintf(w, "updated\t%s\n", stamp(wk.UpdatedAt))
	if dp := wk.Display; dp != nil {
		fmt.Fprintf(w, "title\t%s\n", orDash(oneLine(dp.Title, 200)))
		fmt.Fprintf(w, "ref\t%s\n", orDash(dp.Ref))
		fmt.Fprintf(w, "requester\t%s\n", orDash(dp.Requester))
		for _, l := range dp.Links {
			fmt.Fprintf(w, "link\t%s %s\n", oneLine(l.Label, 60), l.URL)
		}
	}
	if len(wk.CorrelationKeys) > 0 {
		fmt.Fprintf(w, "keys\t%s\n", strings.Join(wk.CorrelationKeys, ", "))
	}
	if wt := d.Wait; wt != nil {
		fmt.Fprintf(w, "waiting for\t%s\n", orDash(wt.Description))
		fmt.Fprintf(w, "progress\t%s\n", orDash(wt.Progress))
		fmt.Fprintf(w, "due\t%s\n", stamp(wt.Due))
	}
	fmt.Fprintf(w, "executions\t%d\n", len(d.Executions))
	for _, x := range d.Executions {
		fmt.Fprintf(w, "  #%d\t%s %s on %s, started %s, ended %s%s\n", x.Attempt, x.ID, x.State, x.Executor,
			stamp(x.StartedAt), stamp(x.EndedAt), errSuffix(x.Error))
	}
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + oneLine(s, 120)
}

func workCancelCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("work cancel", stdout, stderr)
	var reason string
	o.fs.StringVar(&reason, "reason", "", "why")
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		wk, err := c.CancelWork(ctx, o.args[0], reason)
		if err != nil {
			return o.fail(err)
		}
		return o.print(wk, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "work %s is %s (revision %d)\n", wk.ID, wk.State, wk.Revision)
		})
	})
}

func waitsCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("waits", stdout, stderr)
	var q client.WaitQuery
	o.fs.StringVar(&q.Scope, "scope", "", "scope")
	o.fs.StringVar(&q.After, "after", "", "after work ID")
	o.fs.IntVar(&q.Limit, "limit", client.DefaultPageLimit, "page limit")
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		list, err := c.Waits(ctx, q)
		if err != nil {
			return o.fail(err)
		}
		return o.print(list, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "WORK\tSCOPE\tWAITING FOR\tPROGRESS\tDUE")
			for _, wt := range list.Waits {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", wt.WorkID, orDash(wt.ScopeID), orDash(oneLine(wt.Description, 80)),
					orDash(oneLine(wt.Progress, 60)), stamp(wt.Due))
			}
			if list.Next != "" {
				fmt.Fprintf(w, "(more: --after %s)\n", list.Next)
			}
		})
	})
}

// ---- route trace ----

func routeTraceCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("route trace", stdout, stderr)
	var scope, sample, eventFile string
	o.fs.StringVar(&scope, "scope", "", "scope")
	o.fs.StringVar(&sample, "sample", "", "sample name")
	o.fs.StringVar(&eventFile, "event", "", "event file")
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	if scope == "" {
		o.usage("--scope is required")
		return exitUsage
	}
	if (sample == "") == (eventFile == "") {
		o.usage("give exactly one of --sample NAME and --event FILE")
		return exitUsage
	}
	req := client.TraceRequest{Sample: sample}
	if eventFile != "" {
		data, err := readInputFile(eventFile)
		if err != nil {
			return o.fail(err)
		}
		var ev client.TraceEvent
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			return o.fail(fmt.Errorf("%s: not a trace event: %w", eventFile, err))
		}
		req.Event = &ev
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		res, err := c.Trace(ctx, scope, req)
		if err != nil {
			return o.fail(err)
		}
		return o.print(res, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "trace of %s/%s from %s in scope %s (nothing was written)\n", orDash(res.Event.Family), orDash(res.Event.Type),
				res.Event.Source, res.Scope)
			fmt.Fprintln(w, "ROUTE\tHANDLER\tMATCH\tREASON\tKEYS\tNOTE")
			for _, st := range res.Steps {
				match := "no"
				if st.Match {
					match = "yes"
				}
				note := ""
				switch {
				case st.Error != "":
					note = "error: " + oneLine(st.Error, 80)
				case st.Chosen:
					note = "chosen"
				}
				if st.DisplayRefused != "" {
					note = strings.TrimSpace(note + " display refused: " + oneLine(st.DisplayRefused, 80))
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", st.Route, st.Handler, match, orDash(oneLine(st.Reason, 60)),
					orDash(strings.Join(st.CorrelationKeys, ",")), orDash(note))
			}
			if res.Chosen < 0 {
				fmt.Fprintln(w, "no route matches: routing would leave the event unmatched")
			}
		})
	})
}

// ---- config ----

func configShowCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("config show", stdout, stderr)
	if !o.parse(args, 0, 0) {
		return exitUsage
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		view, err := c.Config(ctx)
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			return o.print(view, nil)
		}
		fmt.Fprintf(stdout, "# generation %d %s applied %s (secret references redacted)\n", view.Generation.Number,
			orDash(view.Generation.Hash), stamp(view.Generation.AppliedAt))
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, view.Config, "", "  "); err != nil {
			return o.fail(fmt.Errorf("the daemon's config does not decode: %w", err))
		}
		fmt.Fprintln(stdout, pretty.String())
		return exitOK
	})
}

func configValidateCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("config validate", stdout, stderr)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	doc, err := readInputFile(o.args[0])
	if err != nil {
		return o.fail(err)
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		res, err := c.ValidateConfig(ctx, doc)
		if err != nil {
			return o.fail(err)
		}
		code := o.print(res, func(w *tabwriter.Writer) {
			if res.Valid {
				fmt.Fprintf(w, "%s: valid\n", o.args[0])
			} else {
				fmt.Fprintf(w, "%s: invalid (%d problems)\n", o.args[0], len(res.Diagnostics))
				printDiagnostics(w, res.Diagnostics)
			}
			printWarnings(w, res.Warnings)
		})
		if code == exitOK && !res.Valid {
			return exitFail
		}
		return code
	})
}

func configApplyCommand(args []string, stdout, stderr io.Writer) int {
	o := newOps("config apply", stdout, stderr)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	doc, err := readInputFile(o.args[0])
	if err != nil {
		return o.fail(err)
	}
	return o.call(func(ctx context.Context, c *client.Client) int {
		// Only validate answers the packages' warnings: ask it first, so
		// an apply shows them whether it is refused or accepted.
		checked, err := c.ValidateConfig(ctx, doc)
		if err != nil {
			return o.fail(err)
		}
		gen, err := c.ApplyConfig(ctx, doc)
		if err != nil {
			var apiErr *client.Error
			if errors.As(err, &apiErr) && apiErr.Code == client.CodeConfigInvalid {
				if o.json {
					o.print(client.ConfigResult{Valid: false, Diagnostics: apiErr.Diagnostics, Warnings: checked.Warnings}, nil)
				}
				code := o.fail(err)
				if !o.json {
					printWarnings(o.stderr, checked.Warnings)
				}
				return code
			}
			return o.fail(err)
		}
		return o.print(client.ConfigResult{Valid: true, Generation: &gen, Warnings: checked.Warnings}, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "applied %s as generation %d (%s)\n", o.args[0], gen.Number, gen.Hash)
			printWarnings(w, checked.Warnings)
		})
	})
}
