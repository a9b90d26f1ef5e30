package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
	"github.com/open-conduit/open-conduit/extensions/runner"
)

// Cmds are the commands drills add to testscript's, sorted by name (the
// list with their arguments is in doc.go). Each checks its arguments,
// refuses a "!" it gives no meaning, and says what it expected when it
// fails.
var Cmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"await":     cmdAwait,
	"clock":     cmdClock,
	"config":    cmdConfig,
	"daemon":    cmdDaemon,
	"doctor":    cmdDoctor,
	"expect":    cmdExpect,
	"ext":       cmdExt,
	"fault":     cmdFault,
	"group":     cmdGroup,
	"inbox":     cmdInbox,
	"install":   cmdInstall,
	"reconcile": cmdReconcile,
	"samples":   cmdSamples,
	"webhook":   cmdWebhook,
}

func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("unsupported: ! %s", name)
	}
}

// cmdDaemon: daemon start|restart|dies [NAME=VALUE…] [serve flags…] |
// stop | kill | exited.
func cmdDaemon(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "daemon")
	s := state(ts)
	if len(args) == 0 {
		ts.Fatalf("usage: daemon start|restart|dies [NAME=VALUE...] [serve flags...] | daemon stop | daemon kill | daemon exited")
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "start":
		ts.Check(s.start(rest))
	case "restart":
		if s.d != nil {
			ts.Check(s.stop())
		}
		if len(rest) == 0 {
			rest = s.lastArgs
		}
		ts.Check(s.start(rest))
	case "dies":
		ts.Check(s.dies(rest))
	case "exited":
		if len(rest) != 0 {
			ts.Fatalf("usage: daemon exited (no arguments)")
		}
		ts.Check(s.exited())
	case "stop", "kill":
		if len(rest) != 0 {
			ts.Fatalf("usage: daemon %s (no arguments)", verb)
		}
		if verb == "stop" {
			ts.Check(s.stop())
		} else {
			ts.Check(s.kill())
		}
	default:
		ts.Fatalf("daemon: unknown verb %q: want start, stop, kill, restart, exited or dies", verb)
	}
}

// cmdInstall: install NAME… — a bundled package (notes, runner) installed
// under the config directory, its manifest from this binary.
func cmdInstall(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "install")
	s := state(ts)
	if len(args) == 0 {
		ts.Fatalf("usage: install NAME... (one of %s)", strings.Join(bundledNames(), ", "))
	}
	for _, name := range args {
		manifest, ok := bundled[name]
		if !ok {
			ts.Fatalf("install: %q is no bundled package (want one of %s)", name, strings.Join(bundledNames(), ", "))
		}
		dir := filepath.Join(s.configDir, "extensions", name)
		ts.Check(os.MkdirAll(dir, 0o755))
		ts.Check(os.WriteFile(filepath.Join(dir, "open-conduit-extension.json"), manifest(), 0o644))
	}
}

// bundled are the packages a drill can install: their manifests run them
// as `open-conduit extension-run NAME` on the drill's binary.
var bundled = map[string]func() []byte{
	notes.Name:  func() []byte { return notes.Extension().Manifest },
	runner.Name: func() []byte { return runner.Extension().Manifest },
}

func bundledNames() []string {
	var names []string
	for n := range bundled {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// cmdConfig: config apply FILE — FILE ($NAME expanded) applied to the
// running daemon; with ! the daemon must refuse it.
func cmdConfig(ts *testscript.TestScript, neg bool, args []string) {
	s := state(ts)
	if len(args) != 2 || args[0] != "apply" {
		ts.Fatalf("usage: config apply FILE")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	gen, err := c.ApplyConfig(ctx, []byte(s.expand(ts.ReadFile(args[1]))))
	var apiErr *client.Error
	switch {
	case neg && errors.As(err, &apiErr) && apiErr.Code == client.CodeConfigInvalid:
		for _, d := range apiErr.Diagnostics {
			fmt.Fprintf(ts.Stdout(), "%s: %s: %s\n", d.Path, d.Rule, d.Message)
		}
	case neg && err == nil:
		ts.Fatalf("config apply: the daemon applied %s as generation %d, want a refusal", args[1], gen.Number)
	case err != nil:
		ts.Fatalf("config apply %s: %v", args[1], err)
	default:
		fmt.Fprintf(ts.Stdout(), "generation %d\n", gen.Number)
	}
}

// cmdClock: clock advance DURATION — the daemon's manual clock (serve
// --test-clock) moved forward.
func cmdClock(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "clock")
	s := state(ts)
	if len(args) != 2 || args[0] != "advance" {
		ts.Fatalf("usage: clock advance DURATION")
	}
	d, err := time.ParseDuration(args[1])
	if err != nil || d < 0 {
		ts.Fatalf("clock advance: %q is not a duration that is not negative (such as 90s)", args[1])
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	st, err := c.AdvanceClock(ctx, d)
	if err != nil {
		ts.Fatalf("clock advance %v: %v (was the daemon started with --test-clock?)", d, err)
	}
	fmt.Fprintf(ts.Stdout(), "now %s\n", st.Now.Format(time.RFC3339))
}

// cmdExt: ext kill NAME — SIGKILL to the package's process group; it
// returns once the process has exited and the daemon's change stream
// shows the crash (a package change with more restarts).
func cmdExt(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "ext")
	s := state(ts)
	if len(args) != 2 || args[0] != "kill" {
		ts.Fatalf("usage: ext kill NAME")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	page, err := c.Events(ctx, client.EventQuery{Limit: 1})
	ts.Check(err)
	mark := page.LatestChange // before the status: the crash's change comes after it
	p := s.pkg(ts, args[1])
	if p.PID <= 0 {
		ts.Fatalf("ext kill: package %s runs no process (state %s)", p.Name, p.State)
	}
	if err := syscall.Kill(-p.PID, syscall.SIGKILL); err != nil {
		ts.Fatalf("ext kill %s: process group %d: %v", p.Name, p.PID, err)
	}
	ts.Check(waitGone(p.PID, s.within))
	_, err = c.WaitFor(ctx, client.ChangeQuery{After: mark}, func(ch client.Change) bool {
		return ch.Package != nil && ch.Package.Name == p.Name && ch.Package.Restarts > p.Restarts
	})
	if err != nil {
		ts.Fatalf("ext kill %s: the change stream showed no crash of the package within %v: %v", p.Name, s.within, err)
	}
	s.progress("package %s killed (process group %d, restarts so far %d)", p.Name, p.PID, p.Restarts)
	fmt.Fprintf(ts.Stdout(), "killed %s (pid %d)\n", p.Name, p.PID)
}

// pkg is the running daemon's package name.
func (s *script) pkg(ts *testscript.TestScript, name string) client.Package {
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	st, err := c.Status(ctx)
	ts.Check(err)
	for _, p := range st.Packages {
		if p.Name == name {
			return p
		}
	}
	ts.Fatalf("the daemon runs no package %q", name)
	return client.Package{}
}

// cmdReconcile: reconcile [--want complete|partial|refused] SOURCE — one
// scan of an ingress source now (default want: complete).
func cmdReconcile(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "reconcile")
	s := state(ts)
	want := "complete"
	if len(args) == 3 && args[0] == "--want" {
		want, args = args[1], args[2:]
	}
	if len(args) != 1 || !slices.Contains([]string{"complete", "partial", "refused"}, want) {
		ts.Fatalf("usage: reconcile [--want complete|partial|refused] SOURCE")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	res, err := c.Reconcile(ctx, s.expand(args[0]))
	got := "complete"
	switch {
	case err != nil:
		got = "refused"
		fmt.Fprintf(ts.Stdout(), "refused: %v\n", err)
	case !res.Complete:
		got = "partial"
	}
	if err == nil {
		b, _ := json.Marshal(res)
		fmt.Fprintf(ts.Stdout(), "%s\n", b)
	}
	if got != want {
		ts.Fatalf("reconcile %s: the scan was %s, want %s (%v)", args[0], got, want, err)
	}
}

// filters are FIELD=VALUE words; count=N is taken out.
type filters struct {
	fields map[string]string
	count  int
}

func parseFilters(ts *testscript.TestScript, cmd string, words []string, allowed ...string) filters {
	f := filters{fields: map[string]string{}, count: -1}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			ts.Fatalf("%s: %q is not FIELD=VALUE (fields: %s, count)", cmd, w, strings.Join(allowed, ", "))
		}
		if k == "count" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				ts.Fatalf("%s: count=%q is not a count", cmd, v)
			}
			f.count = n
			continue
		}
		if !slices.Contains(allowed, k) {
			ts.Fatalf("%s: unknown field %q (fields: %s, count)", cmd, k, strings.Join(allowed, ", "))
		}
		f.fields[k] = v
	}
	return f
}

func (f filters) match(got map[string]string) bool {
	for k, v := range f.fields {
		if got[k] != v {
			return false
		}
	}
	return true
}

func (f filters) String() string {
	var parts []string
	for k, v := range f.fields {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}

var (
	eventFields = []string{"source", "delivery", "family", "type", "scope", "schema", "route"}
	workFields  = []string{"id", "state", "kind", "scope", "binding"}
	// workChangeFields are the fields a Work change carries.
	workChangeFields = []string{"id", "state", "scope"}
	execFields       = []string{"work", "state", "attempt", "epoch", "executor"}
	// packageChangeFields are the fields a package change carries.
	packageChangeFields = []string{"name", "state", "restarts"}
)

func eventOf(e client.Event) map[string]string {
	return map[string]string{"source": e.Source, "delivery": e.DeliveryID, "family": e.Family, "type": e.Type,
		"scope": e.ScopeID, "schema": e.Schema}
}

func workOf(w client.Work) map[string]string {
	return map[string]string{"id": w.ID, "state": w.State, "kind": w.Kind, "scope": w.ScopeID, "binding": w.Binding}
}

func execChangeOf(x client.ExecutionChange) map[string]string {
	return map[string]string{"work": x.WorkID, "state": x.State, "attempt": strconv.Itoa(x.Attempt),
		"epoch": strconv.FormatInt(x.Epoch, 10), "executor": x.Executor}
}

func packageChangeOf(p client.PackageChange) map[string]string {
	return map[string]string{"name": p.Name, "state": p.State, "restarts": strconv.Itoa(p.Restarts)}
}

func execOf(x client.Execution) map[string]string {
	return map[string]string{"work": x.WorkID, "state": x.State, "attempt": strconv.Itoa(x.Attempt),
		"epoch": strconv.FormatInt(x.Epoch, 10), "executor": x.Executor}
}

// cmdFault: fault PKG RULE... arms a fault rule (host/faultproxy's grammar,
// such as "crash method=route.match nth=1") on the proxy between the
// daemon and PKG (the daemon runs with --test-faults); fault clear PKG
// disarms them.
func cmdFault(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "fault")
	s := state(ts)
	if len(args) < 2 {
		ts.Fatalf("usage: fault PKG RULE... | fault clear PKG")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	if args[0] == "clear" {
		if len(args) != 2 {
			ts.Fatalf("usage: fault clear PKG")
		}
		if err := c.ClearFaults(ctx, args[1]); err != nil {
			ts.Fatalf("fault clear %s: %v", args[1], err)
		}
		return
	}
	rule := strings.Join(args[1:], " ")
	if err := c.InjectFault(ctx, args[0], rule); err != nil {
		ts.Fatalf("fault %s %s: %v (was the daemon started with --test-faults?)", args[0], rule, err)
	}
	s.progress("fault armed on %s: %s", args[0], rule)
}

// firedFaults is how many times PKG's armed rules have fired.
func firedFaults(ctx context.Context, c *client.Client, pkg string) ([]string, error) {
	st, err := c.Faults(ctx, pkg)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range st.Rules {
		for range r.Fired {
			out = append(out, fmt.Sprintf("fired %s (counted %d)", r.Rule, r.Counted))
		}
	}
	return out, nil
}

// cmdSamples: samples SCOPE prints the sample Events the scope's routes
// offer, one ID a line (a route whose handler failed is left out).
func cmdSamples(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "samples")
	s := state(ts)
	if len(args) != 1 {
		ts.Fatalf("usage: samples SCOPE")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	list, err := c.Samples(ctx, args[0])
	if err != nil {
		ts.Fatalf("samples %s: %v", args[0], err)
	}
	for _, smp := range list {
		fmt.Fprintf(ts.Stdout(), "sample %s\n", smp.ID)
	}
}

// cmdDoctor: doctor [--want ok|fail] runs the daemon's doctor and prints
// each check; the report must be ok (default) or fail.
func cmdDoctor(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "doctor")
	s := state(ts)
	want := "ok"
	if len(args) == 2 && args[0] == "--want" && (args[1] == "ok" || args[1] == "fail") {
		want, args = args[1], nil
	}
	if len(args) != 0 {
		ts.Fatalf("usage: doctor [--want ok|fail]")
	}
	c, err := s.api()
	ts.Check(err)
	ctx, cancel := s.ctx()
	defer cancel()
	rep, err := c.Doctor(ctx, false)
	ts.Check(err)
	for _, ch := range rep.Checks {
		fmt.Fprintf(ts.Stdout(), "%s %s %s %s\n", ch.Status, ch.Name, ch.Code, ch.Detail)
	}
	if got := map[bool]string{true: "ok", false: "fail"}[rep.OK]; got != want {
		ts.Fatalf("doctor: the report is %s, want %s", got, want)
	}
}
