package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// CheckTimeout bounds one package check (check.run) of a doctor run; the
// checks run at once, so a doctor run takes the slowest.
var CheckTimeout = 30 * time.Second

// The codes of the daemon's own checks.
const (
	CodePackageNotRunning = "extension_not_running"
	CodePackageRestarted  = "extension_restarted"
	CodePackageRefused    = "extension_refused"
	CodeStoreCorrupt      = "store_integrity"
	CodeLockLost          = "lock_lost"
)

// Doctor runs the daemon's own checks (extensions: each package started,
// its version, protocol and restarts; store: SQLite's integrity check;
// lock: the state lock is this daemon's; telemetry: what was captured and
// what each sink was delivered or lost) and every check a package
// declares, through check.run with the read-only configuration view of
// how the generation in force uses the package. deep asks for the
// checks' thorough forms. The report is not OK when any check fails.
func (d *Daemon) Doctor(ctx context.Context, deep bool) client.DoctorReport {
	checks := []client.DoctorCheck{d.extensionsCheck(), d.storeCheck(ctx), d.lockCheck()}
	if d.telemetry != nil {
		checks = append(checks, d.telemetry.check())
	}
	checks = append(checks, d.packageChecks(ctx, deep)...)
	return doctorReport(checks)
}

func doctorReport(checks []client.DoctorCheck) client.DoctorReport {
	rep := client.DoctorReport{OK: true, Checks: checks}
	for _, c := range checks {
		if c.Status == client.CheckFail {
			rep.OK = false
		}
	}
	return rep
}

// extensionsCheck is the packages' own health: it fails when an admitted
// package is not running, and warns of a restarted one or one discovery
// refused.
func (d *Daemon) extensionsCheck() client.DoctorCheck {
	c := client.DoctorCheck{Name: "extensions", Status: client.CheckOK}
	var down, restarted []string
	for _, pr := range d.packages() {
		proc, _, _ := pr.parts()
		state, restarts, err := proc.Status()
		item := fmt.Sprintf("%s %s: %s, protocol %d, %d restarts", pr.pkg.Name, pr.pkg.Manifest.Version, packageState(state), proc.Version(), restarts)
		if err != nil && state != host.Running {
			item += ": " + clip(oneLine(err.Error()), maxRefusalBytes)
		}
		c.Items = append(c.Items, item)
		switch {
		case state != host.Running:
			down = append(down, pr.pkg.Name)
		case restarts > 0:
			restarted = append(restarted, pr.pkg.Name)
		}
	}
	for _, p := range d.refusedPackages() {
		c.Items = append(c.Items, fmt.Sprintf("%s: refused: %s", p.Name, clip(oneLine(p.LastError), maxRefusalBytes)))
	}
	switch {
	case len(down) > 0:
		c.Status, c.Code = client.CheckFail, CodePackageNotRunning
		c.Detail = "not running: " + strings.Join(down, ", ")
	case len(d.refusedPackages()) > 0:
		c.Status, c.Code = client.CheckWarn, CodePackageRefused
		c.Detail = fmt.Sprintf("%d packages refused at discovery", len(d.refusedPackages()))
	case len(restarted) > 0:
		c.Status, c.Code = client.CheckWarn, CodePackageRestarted
		c.Detail = "restarted: " + strings.Join(restarted, ", ")
	default:
		c.Detail = fmt.Sprintf("%d packages running", len(d.packages()))
	}
	return c
}

// storeCheck runs SQLite's integrity check on the daemon's store.
func (d *Daemon) storeCheck(ctx context.Context) client.DoctorCheck {
	c := client.DoctorCheck{Name: "store", Status: client.CheckOK, Detail: "integrity check passed: " + storeDir(d.opts.StateDir)}
	if d.sqlite == nil {
		return client.DoctorCheck{Name: "store", Status: client.CheckFail, Code: CodeStoreCorrupt, Detail: "no store is open"}
	}
	if err := d.sqlite.Check(ctx); err != nil {
		c.Status, c.Code, c.Detail = client.CheckFail, CodeStoreCorrupt, clip(oneLine(err.Error()), maxRefusalBytes)
	}
	return c
}

// lockCheck: <state>/lock is still the file this daemon locked, and names
// its PID, so a second daemon would be refused.
func (d *Daemon) lockCheck() client.DoctorCheck {
	path := lockPath(d.opts.StateDir)
	fail := func(format string, args ...any) client.DoctorCheck {
		return client.DoctorCheck{Name: "lock", Status: client.CheckFail, Code: CodeLockLost, Detail: fmt.Sprintf(format, args...)}
	}
	if d.lock == nil {
		return fail("this daemon holds no lock on %s", path)
	}
	held, err := d.lock.f.Stat()
	if err != nil {
		return fail("the lock file: %v", err)
	}
	now, err := os.Stat(path)
	if err != nil || !os.SameFile(held, now) {
		return fail("%s is no longer the file this daemon locked: a second daemon could start", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fail("reading %s: %v", path, err)
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid != os.Getpid() {
		return fail("%s names pid %q, not this daemon's %d", path, strings.TrimSpace(string(b)), os.Getpid())
	}
	return client.DoctorCheck{Name: "lock", Status: client.CheckOK, Detail: fmt.Sprintf("pid %d holds %s", os.Getpid(), path)}
}

// DoctorCheckName is the name doctor lists a package's check under: the
// check's own when it is the package's name or starts with "<package>_"
// or "<package>-", else "<package>_<check>".
func DoctorCheckName(pkg, check string) string {
	if check == pkg || strings.HasPrefix(check, pkg+"_") || strings.HasPrefix(check, pkg+"-") {
		return check
	}
	return pkg + "_" + check
}

// packageChecks runs every declared check of every admitted package at
// once, each bounded by CheckTimeout, in package then check order.
func (d *Daemon) packageChecks(ctx context.Context, deep bool) []client.DoctorCheck {
	d.mu.Lock()
	cfg := d.current
	d.mu.Unlock()
	type job struct {
		pr   *pkgRun
		decl protocol.CheckDecl
	}
	var jobs []job
	for _, pr := range d.packages() {
		for _, c := range pr.pkg.Manifest.Provides.Checks {
			jobs = append(jobs, job{pr, c})
		}
	}
	out := make([]client.DoctorCheck, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			out[i] = d.runPackageCheck(ctx, j.pr, j.decl.Name, deep, cfg)
		})
	}
	wg.Wait()
	slices.SortStableFunc(out, func(a, b client.DoctorCheck) int {
		return cmp.Or(cmp.Compare(a.Package, b.Package), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (d *Daemon) runPackageCheck(ctx context.Context, pr *pkgRun, check string, deep bool, cfg *Config) client.DoctorCheck {
	name := pr.pkg.Name
	c := client.DoctorCheck{Name: DoctorCheckName(name, check), Package: name}
	proc, remote, _ := pr.parts()
	if st, _, _ := proc.Status(); st != host.Running {
		// Process.Call would wait for a restart; the extensions check
		// already fails for it.
		c.Status, c.Code, c.Detail = client.CheckWarn, host.CheckFailedCode, fmt.Sprintf("not run: package %s is %s", name, packageState(st))
		return c
	}
	view, err := json.Marshal(checkViewFor(d.opts.ConfigDir, cfg, d.catalogue(), pr.pkg.Manifest))
	if err != nil {
		view = json.RawMessage(`{}`)
	}
	cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	res, err := remote.RunCheck(cctx, protocol.CheckRunParams{Check: check, Deep: deep, Config: view})
	if err != nil {
		// A crash, a timeout or a refusal: reported, and run again at the
		// next doctor.
		d.log.Warn("doctor check failed to run", "package", name, "check", check, "err", err)
		c.Status, c.Code, c.Detail = client.CheckWarn, host.CheckFailedCode, clip(oneLine("check.run: "+err.Error()), maxRefusalBytes)
		return c
	}
	c.Status, c.Code = string(res.Status), res.Code
	c.Detail = clip(oneLine(res.Detail), maxCheckDetail)
	for i, item := range res.Items {
		if i == maxCheckItems {
			c.Items = append(c.Items, fmt.Sprintf("… %d more", len(res.Items)-i))
			break
		}
		c.Items = append(c.Items, clip(oneLine(item), maxCheckDetail))
	}
	return c
}

// Bounds of what doctor shows of a package's answer.
const (
	maxCheckDetail = 1024
	maxCheckItems  = 100
)

// checkView is the read-only configuration view a package's check gets
// (protocol.CheckRunParams.Config): the config file's directory, each
// enabled scope that uses the package with that scope's routes and
// bindings and the package's own entries, and the connections of its own
// types those name, config only. It never carries a secret value or
// reference text.
type checkView struct {
	Dir         string                `json:"dir"`
	Scopes      []checkViewScope      `json:"scopes"`
	Connections []checkViewConnection `json:"connections"`
}

type checkViewScope struct {
	ID       string             `json:"id"`
	Entries  []checkViewEntry   `json:"entries"`
	Routes   []checkViewRoute   `json:"routes"`
	Bindings []checkViewBinding `json:"bindings"`
}

type checkViewEntry struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Config     json.RawMessage `json:"config"`
	Connection string          `json:"connection,omitempty"`
}

type checkViewRoute struct {
	ID      string `json:"id,omitempty"`
	Handler string `json:"handler"`
	Kind    string `json:"kind"`
	Binding string `json:"binding,omitempty"`
	// Config is the route's config for the package's own handlers only.
	Config json.RawMessage `json:"config,omitempty"`
}

type checkViewBinding struct {
	Name       string   `json:"name"`
	Executor   string   `json:"executor"`
	Toolbelt   bool     `json:"toolbelt,omitempty"`
	Operations []string `json:"operations,omitempty"`
	Connection string   `json:"connection,omitempty"`
	Pool       string   `json:"pool,omitempty"`
	// ExecutorConfig is set for a binding of the package's own executors.
	ExecutorConfig json.RawMessage `json:"executor_config,omitempty"`
}

type checkViewConnection struct {
	Name   string          `json:"name"`
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config"`
}

// checkViewFor builds m's view of cfg.
func checkViewFor(dir string, cfg *Config, cat *catalogue, m *protocol.Manifest) checkView {
	v := checkView{Dir: dir, Scopes: []checkViewScope{}, Connections: []checkViewConnection{}}
	own := func(table map[string]string, name string) bool { return table[name] == m.Name }
	ownOp := func(ops []string) bool {
		return slices.ContainsFunc(ops, func(op string) bool { return own(cat.operations, op) })
	}
	ownConn := map[string]bool{}
	for _, c := range cfg.Connections {
		if own(cat.connTypes, c.Type) {
			ownConn[c.Name] = true
		}
	}
	named := map[string]bool{}
	for _, sc := range cfg.Scopes {
		if sc.Disabled {
			continue
		}
		s := checkViewScope{ID: sc.ID, Entries: []checkViewEntry{}, Routes: []checkViewRoute{}, Bindings: []checkViewBinding{}}
		uses := false
		for _, e := range sc.Entries {
			if own(cat.types, e.Type) {
				uses = true
				s.Entries = append(s.Entries, checkViewEntry{ID: e.ID, Type: e.Type, Config: rawObject(e.Config), Connection: e.Connection})
				if ownConn[e.Connection] {
					named[e.Connection] = true
				}
			}
		}
		for _, r := range sc.Routes {
			vr := checkViewRoute{ID: r.ID, Handler: r.Handler, Kind: r.Kind, Binding: r.Binding}
			if own(cat.handlers, r.Handler) {
				uses = true
				vr.Config = rawObject(r.Config)
			}
			s.Routes = append(s.Routes, vr)
		}
		for _, b := range sc.Bindings {
			ops := slices.Clone(b.Operations)
			for _, ts := range b.Toolsets {
				ops = append(ops, cat.toolsets[ts]...)
			}
			slices.Sort(ops)
			ops = slices.Compact(ops)
			vb := checkViewBinding{Name: b.Name, Executor: b.Executor, Toolbelt: b.Toolbelt, Operations: ops, Connection: b.Connection, Pool: b.Pool}
			if own(cat.executors, b.Executor) {
				uses = true
				vb.ExecutorConfig = rawObject(b.ExecutorConfig)
			}
			if b.Toolbelt && ownOp(ops) {
				uses = true
			}
			if ownConn[b.Connection] {
				uses = true
				named[b.Connection] = true
			}
			s.Bindings = append(s.Bindings, vb)
		}
		if uses {
			v.Scopes = append(v.Scopes, s)
		}
	}
	for _, c := range cfg.Connections {
		if named[c.Name] {
			v.Connections = append(v.Connections, checkViewConnection{Name: c.Name, Type: c.Type, Config: rawObject(c.Config)})
		}
	}
	return v
}

// doctor is GET /v1/doctor[?deep=true].
func (a *api) doctor(w http.ResponseWriter, r *http.Request) error {
	deep := false
	if s := r.URL.Query().Get("deep"); s != "" {
		var err error
		if deep, err = strconv.ParseBool(s); err != nil {
			return client.Errorf(client.CodeInvalidRequest, "deep is true or false, not %q", clipForMessage(s))
		}
	}
	writeJSON(w, http.StatusOK, a.b.Doctor(r.Context(), deep))
	return nil
}
