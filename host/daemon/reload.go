package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// A package reload (POST /v1/packages/reload, which `open-conduit
// extension install|update|rollback|remove` sends) brings the running
// daemon to the packages on disk without a restart: it discovers them
// again, stops the process of every package removed or replaced, then
// starts every package added or replaced with its part of the generation
// in force (a new release migrates its KV in that configure), and leaves
// every other package's process running. The package set is replaced
// whole under setMu; everything else reads it through packages(),
// refusedPackages() and catalogue().

// installRoot is where packages are installed: <config>/extensions.
func installRoot(config string) string { return filepath.Join(config, "extensions") }

// packages is the admitted packages now, in discovery order.
func (d *Daemon) packages() []*pkgRun {
	d.setMu.RLock()
	defer d.setMu.RUnlock()
	return d.pkgs
}

// refusedPackages is the packages discovery did not admit.
func (d *Daemon) refusedPackages() []client.Package {
	d.setMu.RLock()
	defer d.setMu.RUnlock()
	return d.refused
}

// catalogue is what the admitted packages declare.
func (d *Daemon) catalogue() *catalogue {
	d.setMu.RLock()
	defer d.setMu.RUnlock()
	return d.cat
}

// newPkgRun composes one admitted package: its host service and its
// process (not started), with the configure it starts with.
func (d *Daemon) newPkgRun(p host.Package, passEnv []string) (*pkgRun, error) {
	pr := &pkgRun{pkg: p, passEnv: passEnv}
	params := protocol.ConfigureParams{Entries: []protocol.ConfigEntry{}, Connections: []protocol.Connection{}}
	if d.opts.Configure != nil {
		params = d.opts.Configure(p)
	}
	pr.params.Store(&params)
	pr.svc = host.NewService(host.ServiceConfig{Manifest: p.Manifest, Store: d.store, Blobs: d.sqlite,
		Secrets: &secretResolver{d: d, pkg: p.Name}, Engine: d.engine, Telemetry: telemetryRecorder{d}})
	if err := d.newProcess(pr); err != nil {
		return nil, err
	}
	return pr, nil
}

// samePackage reports whether discovery found the same release where the
// running one came from. A release whose manifest is unchanged but whose
// files changed is reloaded only when named (PackageReloadRequest.Changed).
func samePackage(a, b host.Package) bool {
	return a.Dir == b.Dir && a.Bundled == b.Bundled && reflect.DeepEqual(a.Manifest, b.Manifest)
}

func refusedOf(problems []host.Problem) []client.Package {
	var out []client.Package
	for _, p := range problems {
		out = append(out, client.Package{Name: p.Name, State: "refused", Origin: origin(p.Bundled), Dir: p.Dir, LastError: p.Err.Error()})
	}
	return out
}

// ReloadPackages brings the daemon to the packages on disk (see the top
// of this file); changed names packages to restart even when their
// manifest reads the same. A set whose names conflict changes nothing
// (conflict). A new process that fails to start is reported in the
// answer's packages, as status would show it.
func (d *Daemon) ReloadPackages(ctx context.Context, changed []string) (client.PackageReload, error) {
	out := client.PackageReload{Started: []string{}, Restarted: []string{}, Stopped: []string{}, Unchanged: []string{}}
	if d.opts.Packages != nil {
		return out, client.Errorf(client.CodeConflict, "this daemon runs a fixed set of packages; it reloads none")
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.mu.Lock()
	closed, cfg, gen := d.closed, d.current, d.gen
	d.mu.Unlock()
	if closed {
		return out, client.Errorf(client.CodeUnavailable, "the daemon is shutting down")
	}
	root := installRoot(d.opts.ConfigDir)
	if err := packages.Recover(root); err != nil {
		return out, fmt.Errorf("recovering the install tree: %w", err)
	}
	found, problems, err := host.DiscoverAll(root, d.opts.BundledDir)
	if err != nil {
		return out, fmt.Errorf("discovering packages: %w", err)
	}
	if err := host.CheckConflicts(found, nil); err != nil {
		return out, client.Errorf(client.CodeConflict, "the packages on disk conflict, so nothing was reloaded: %v", oneLine(err.Error()))
	}
	old := d.packages()
	byName := map[string]*pkgRun{}
	for _, pr := range old {
		byName[pr.pkg.Name] = pr
	}
	named := map[string]bool{}
	for _, n := range changed {
		named[n] = true
	}
	var next, starts, stops []*pkgRun
	var manifests []*protocol.Manifest
	seen := map[string]bool{}
	for _, p := range found {
		seen[p.Name] = true
		manifests = append(manifests, p.Manifest)
		pr, running := byName[p.Name]
		if running && !named[p.Name] && samePackage(pr.pkg, p) {
			next = append(next, pr)
			out.Unchanged = append(out.Unchanged, p.Name)
			continue
		}
		npr, err := d.newPkgRun(p, cfg.Settings.PassEnv[p.Name])
		if err != nil {
			return client.PackageReload{}, err // nothing has stopped yet
		}
		if running {
			stops = append(stops, pr)
			out.Restarted = append(out.Restarted, p.Name)
		} else {
			out.Started = append(out.Started, p.Name)
		}
		next = append(next, npr)
		starts = append(starts, npr)
	}
	for _, pr := range old {
		if !seen[pr.pkg.Name] {
			stops = append(stops, pr)
			out.Stopped = append(out.Stopped, pr.pkg.Name)
		}
	}

	// No two releases of a package ever run at once: the old processes
	// stop (shutdown, within their bounds) before the new ones start.
	var wg sync.WaitGroup
	for _, pr := range stops {
		wg.Go(func() {
			proc, _, _ := pr.parts()
			if err := proc.Close(context.WithoutCancel(ctx)); err != nil {
				d.log.Warn("stopping a package for a reload", "package", pr.pkg.Name, "err", err)
			}
		})
	}
	wg.Wait()
	d.setMu.Lock()
	d.pkgs, d.refused, d.cat = next, refusedOf(problems), newCatalogue(manifests)
	d.setMu.Unlock()
	// Before the new processes start, so what they capture in their first
	// configure reaches the sinks, themselves among them.
	if d.telemetry != nil {
		d.telemetry.setSinks(d.sinkNames())
	}

	procs := make([]*host.Process, len(starts))
	for i, pr := range starts {
		p := d.paramsFor(cfg, pr, gen)
		pr.params.Store(&p)
		procs[i], _, _ = pr.parts()
	}
	for i, err := range host.StartAll(context.WithoutCancel(ctx), procs) {
		if err != nil {
			d.log.Error("package did not start after a reload", "package", starts[i].pkg.Name, "err", err)
		}
	}
	if err := d.engine.Reconfigure(d.tables(cfg)); err != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the engine kept its tables: %v (fix the configuration and apply it)", err))
		d.log.Error("engine tables after a package reload", "err", err)
	}
	// A kept pass runs through the process it was made with: drop the
	// replaced packages' passes before they are made again.
	replaced := func(specs []passSpec) []passSpec {
		return slices.DeleteFunc(specs, func(s passSpec) bool { return slices.Contains(out.Restarted, s.pkg) })
	}
	d.passes.set(client.PassTask, replaced(d.taskPasses()))
	d.passes.set(client.PassTask, d.taskPasses())
	d.passes.set(client.PassReconcile, replaced(d.sourcePasses()))
	d.syncSourcePasses()
	d.log.Info("packages reloaded", "started", out.Started, "restarted", out.Restarted, "stopped", out.Stopped)
	out.Packages = d.Status(ctx).Packages
	return out, nil
}

// KVLayouts is the KV layout version the store records for each package
// that has one: the kv_version of its last successful configure.
func (d *Daemon) KVLayouts(ctx context.Context) (map[string]int, error) {
	return readKVLayouts(ctx, d.store)
}

func readKVLayouts(ctx context.Context, s runtime.Store) (map[string]int, error) {
	out := map[string]int{}
	err := s.View(ctx, func(tx runtime.ReadTx) error {
		after := ""
		for {
			page, err := tx.KVList(host.KVLayoutNamespace, "", after, runtime.MaxPageLimit)
			if err != nil {
				return err
			}
			for _, e := range page {
				v := 0
				if err := json.Unmarshal(e.Value, &v); err != nil {
					return fmt.Errorf("the KV layout of %s is unreadable: %w", e.Key, err)
				}
				out[e.Key] = v
			}
			if len(page) < runtime.MaxPageLimit {
				return nil
			}
			after = page[len(page)-1].Key
		}
	})
	return out, err
}

// ReadKVLayouts reads the KV layouts recorded in the state directory
// state with no daemon running: it holds the state lock for the read, so
// no daemon starts on the store meanwhile. A *LockedError (ErrLocked)
// means a daemon holds it: ask that daemon (GET /v1/packages/kv-layouts).
// A state directory with no store has no layouts recorded.
func ReadKVLayouts(ctx context.Context, state string) (map[string]int, error) {
	if _, err := os.Stat(filepath.Join(storeDir(state), sqlite.DatabaseFile)); errors.Is(err, fs.ErrNotExist) {
		return map[string]int{}, nil
	}
	lock, err := acquireLock(lockPath(state))
	if err != nil {
		return nil, err
	}
	defer lock.release()
	s, err := sqlite.Open(storeDir(state))
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	defer s.Close()
	return readKVLayouts(ctx, s)
}

// ---- the routes ----

// packageReloader is the part of the backend the package routes need;
// a backend without it (a test's) answers them unavailable.
type packageReloader interface {
	ReloadPackages(ctx context.Context, changed []string) (client.PackageReload, error)
	KVLayouts(ctx context.Context) (map[string]int, error)
}

func (a *api) reloader() (packageReloader, error) {
	r, ok := a.b.(packageReloader)
	if !ok {
		return nil, client.Errorf(client.CodeUnavailable, "this daemon does not reload packages")
	}
	return r, nil
}

func (a *api) reloadPackages(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	var req client.PackageReloadRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	for _, n := range req.Changed {
		if !protocol.IsIdentifier(n) {
			return client.Errorf(client.CodeInvalidRequest, "changed: %q is not a package name", clipForMessage(n))
		}
	}
	rl, err := a.reloader()
	if err != nil {
		return err
	}
	res, err := rl.ReloadPackages(r.Context(), req.Changed)
	if err != nil {
		return err
	}
	return ok(w, res)
}

func (a *api) kvLayouts(w http.ResponseWriter, r *http.Request) error {
	rl, err := a.reloader()
	if err != nil {
		return err
	}
	layouts, err := rl.KVLayouts(r.Context())
	if err != nil {
		return err
	}
	return ok(w, client.KVLayouts{Layouts: layouts})
}
