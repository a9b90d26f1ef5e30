package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// ValidateTimeout bounds the validate calls of one document.
var ValidateTimeout = 15 * time.Second

// maxRefusalBytes caps a package's refusal message in a diagnostic.
const maxRefusalBytes = 300

// ValidateConfig checks doc whole: strictly parsed, every reference and
// name checked against the admitted packages, and each entry, route
// config, binding, executor config and connection checked by its
// package's validate. It returns every diagnostic; nil means valid. It
// changes nothing.
func (d *Daemon) ValidateConfig(ctx context.Context, doc []byte) []client.Diagnostic {
	_, ds, _ := d.validateWarn(ctx, doc)
	return ds
}

// ValidateConfigWarnings checks doc as ValidateConfig does and also
// returns the warnings packages gave about objects they accepted (rule
// RulePackageWarning): a valid configuration may still have settings that
// should change.
func (d *Daemon) ValidateConfigWarnings(ctx context.Context, doc []byte) (diags, warnings []client.Diagnostic) {
	_, diags, warnings = d.validateWarn(ctx, doc)
	return diags, warnings
}

func (d *Daemon) validate(ctx context.Context, doc []byte) (*Config, []client.Diagnostic) {
	cfg, ds, _ := d.validateWarn(ctx, doc)
	return cfg, ds
}

func (d *Daemon) validateWarn(ctx context.Context, doc []byte) (*Config, []client.Diagnostic, []client.Diagnostic) {
	cfg, ds := ParseConfig(doc)
	if len(ds) > 0 {
		return nil, ds, nil
	}
	ds = checkStatic(cfg, d.catalogue())
	if len(ds) > 0 {
		// Package checks need objects that name what exists.
		return nil, ds, nil
	}
	ds, warnings := d.checkByPackages(ctx, cfg)
	if len(ds) > 0 {
		return nil, ds, warnings
	}
	return cfg, nil, warnings
}

// validateCall is one object a package's validate checks.
type validateCall struct {
	path   string
	pkg    *pkgRun
	params protocol.ValidateParams
}

// checkByPackages asks each object's package to validate it, every
// package at once, and reports every refusal, and every warning about
// an object a package accepted.
func (d *Daemon) checkByPackages(ctx context.Context, cfg *Config) (refusals, warnings []client.Diagnostic) {
	byName := map[string]*pkgRun{}
	for _, pr := range d.packages() {
		byName[pr.pkg.Name] = pr
	}
	var calls []validateCall
	add := func(path, owner string, p protocol.ValidateParams) {
		if pr := byName[owner]; pr != nil {
			calls = append(calls, validateCall{path: path, pkg: pr, params: p})
		}
	}
	for i, c := range cfg.Connections {
		add(fmt.Sprintf("$.connections[%d]", i), d.catalogue().connTypes[c.Type], protocol.ValidateParams{Kind: protocol.ValidateConnection,
			Type: c.Type, ID: c.Name, Config: rawObject(c.Config), SecretNames: sortedKeys(c.SecretRefs)})
	}
	for i, sc := range cfg.Scopes {
		at := fmt.Sprintf("$.scopes[%d]", i)
		for j, e := range sc.Entries {
			add(fmt.Sprintf("%s.entries[%d]", at, j), d.catalogue().types[e.Type], protocol.ValidateParams{Kind: protocol.ValidateExtension,
				Type: e.Type, ScopeID: sc.ID, ID: e.ID, Config: rawObject(e.Config)})
		}
		for j, b := range sc.Bindings {
			add(fmt.Sprintf("%s.bindings[%d].executor_config", at, j), d.catalogue().executors[b.Executor], protocol.ValidateParams{Kind: protocol.ValidateExecutor,
				Type: b.Executor, ScopeID: sc.ID, ID: b.Name, Config: rawObject(b.ExecutorConfig)})
		}
		for j, r := range sc.Routes {
			owner := d.catalogue().handlers[r.Handler]
			add(fmt.Sprintf("%s.routes[%d].config", at, j), owner, protocol.ValidateParams{Kind: protocol.ValidateRoute,
				Type: r.Handler, ScopeID: sc.ID, ID: r.ID, Config: rawObject(r.Config)})
			if r.Binding == "" || !d.catalogue().bindingChk[r.Handler] {
				continue
			}
			for _, b := range sc.Bindings {
				if b.Name == r.Binding {
					add(fmt.Sprintf("%s.routes[%d].binding", at, j), owner, protocol.ValidateParams{Kind: protocol.ValidateBinding,
						Type: r.Handler, ScopeID: sc.ID, ID: r.ID, Config: rawObject(r.Config),
						Binding: &protocol.BindingView{Name: b.Name, Executor: b.Executor, ExecutorConfig: rawObject(b.ExecutorConfig),
							Operations: b.Operations, Toolsets: b.Toolsets, Connection: b.Connection}})
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, ValidateTimeout)
	defer cancel()
	out := make([]*client.Diagnostic, len(calls))
	warned := make([][]client.Diagnostic, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			_, remote, _ := c.pkg.parts()
			res, err := remote.Validate(ctx, c.params)
			switch {
			case err == nil:
				for j, w := range res.Warnings {
					if j == maxWarningsPerObject {
						break
					}
					warned[i] = append(warned[i], client.Diagnostic{Path: c.path, Rule: RulePackageWarning,
						Message: clip(oneLine(w), maxRefusalBytes)})
				}
			case errors.Is(err, host.ErrValidateRefused):
				rule := RuleInvalidConfig
				if c.params.Kind == protocol.ValidateBinding {
					rule = RuleBindingRefused
				}
				out[i] = &client.Diagnostic{Path: c.path, Rule: rule, Message: clip(oneLine(err.Error()), maxRefusalBytes)}
			default:
				out[i] = &client.Diagnostic{Path: c.path, Rule: RuleExtensionUnavailbl,
					Message: clip(oneLine(fmt.Sprintf("package %s could not validate it: %v", c.pkg.pkg.Name, err)), maxRefusalBytes)}
			}
		})
	}
	wg.Wait()
	for i, dg := range out {
		if dg != nil {
			refusals = append(refusals, *dg)
		}
		warnings = append(warnings, warned[i]...)
	}
	return refusals, warnings
}

// RulePackageWarning names a warning a package gave about an object it
// accepted; it refuses nothing.
const RulePackageWarning = "package_warning"

// maxWarningsPerObject bounds how many warnings one object's package adds
// to an answer.
const maxWarningsPerObject = 8

// oneLine is a package's message as one line: control characters (a
// newline that would forge a second log line included) become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// ApplyConfig validates doc and, when it is valid, applies it as the new
// generation without a restart: the generation is stored, each package is
// configured again with its part, and the engine's tables are replaced at
// once. A refused doc returns every diagnostic (and no error), and the
// generation in force keeps serving. Applying the document in force again
// changes nothing.
func (d *Daemon) ApplyConfig(ctx context.Context, doc []byte) (client.Generation, []client.Diagnostic, error) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	cfg, ds := d.validate(ctx, doc)
	if len(ds) > 0 {
		return d.Generation(), ds, nil
	}
	hash := HashConfig(doc)
	d.mu.Lock()
	cur := d.gen
	d.mu.Unlock()
	if cur.Number > 0 && cur.Hash == hash {
		return cur, nil, nil
	}
	gen, err := d.storeGeneration(ctx, cfg, doc, hash)
	if err != nil {
		return cur, nil, fmt.Errorf("daemon: storing the generation: %w", err)
	}
	if err := d.activate(ctx, cfg, gen); err != nil {
		return gen, nil, err
	}
	d.mu.Lock()
	d.current, d.doc, d.gen = cfg, append([]byte(nil), doc...), gen
	d.mu.Unlock()
	d.log.Info("configuration applied", "generation", gen.Number, "hash", gen.Hash, "scopes", len(cfg.Scopes))
	return gen, nil, nil
}

// Reload re-reads config.json and applies it (SIGHUP). A missing file is
// the empty configuration.
func (d *Daemon) Reload(ctx context.Context) (client.Generation, []client.Diagnostic, error) {
	doc, _, err := ReadConfigFile(d.opts.ConfigDir)
	if err != nil {
		return d.Generation(), nil, err
	}
	return d.ApplyConfig(ctx, doc)
}

// activate configures every package with its part of cfg and replaces
// the engine's tables.
func (d *Daemon) activate(ctx context.Context, cfg *Config, gen client.Generation) error {
	var wg sync.WaitGroup
	for _, pr := range d.packages() {
		if !slices.Equal(cfg.Settings.PassEnv[pr.pkg.Name], pr.passEnv) {
			d.log.Warn("settings.pass_env changed: it takes effect when the daemon restarts", "package", pr.pkg.Name)
		}
		p := d.paramsFor(cfg, pr, gen)
		pr.params.Store(&p)
		wg.Go(func() {
			proc, _, _ := pr.parts()
			st, _, _ := proc.Status()
			if st != host.Running {
				return // it gets these params when it next starts
			}
			if err := proc.Reconfigure(ctx); err != nil {
				d.log.Error("configure failed", "package", pr.pkg.Name, "generation", gen.Number, "err", err)
			}
		})
	}
	wg.Wait()
	if err := d.engine.Reconfigure(d.tables(cfg)); err != nil {
		return fmt.Errorf("daemon: engine tables: %w", err)
	}
	d.syncSourcePasses()
	return nil
}

// paramsFor is the configure of one package: its entries (enabled and
// disabled), the connections of its types that scopes authorize, with
// secret names only, and the generation.
func (d *Daemon) paramsFor(cfg *Config, pr *pkgRun, gen client.Generation) protocol.ConfigureParams {
	m := pr.pkg.Manifest
	p := protocol.ConfigureParams{Entries: []protocol.ConfigEntry{}, Connections: []protocol.Connection{},
		PublicURL: cfg.Settings.Webhooks.PublicURL, Generation: gen.Number, GenerationHash: gen.Hash}
	mine := func(typ string) bool { return d.catalogue().types[typ] == m.Name }
	myConn := map[string]bool{}
	for _, c := range cfg.Connections {
		if d.catalogue().connTypes[c.Type] == m.Name {
			myConn[c.Name] = true
		}
	}
	sent := map[string]bool{}
	for _, sc := range cfg.Scopes {
		var bindingConns []string
		for _, b := range sc.Bindings {
			if b.Connection != "" && myConn[b.Connection] && !slices.Contains(bindingConns, b.Connection) {
				bindingConns = append(bindingConns, b.Connection)
			}
		}
		for _, e := range sc.Entries {
			if !mine(e.Type) {
				continue
			}
			ce := protocol.ConfigEntry{ScopeID: sc.ID, ID: e.ID, Type: e.Type, Config: rawObject(e.Config),
				Connection: e.Connection, BindingConnections: bindingConns}
			if sc.Disabled {
				p.Disabled = append(p.Disabled, ce)
			} else {
				p.Entries = append(p.Entries, ce)
			}
			for _, name := range append([]string{e.Connection}, bindingConns...) {
				if name != "" {
					sent[name] = true
				}
			}
		}
		if !sc.Disabled {
			for _, name := range bindingConns {
				sent[name] = true
			}
		}
	}
	for _, c := range cfg.Connections {
		if sent[c.Name] && myConn[c.Name] {
			p.Connections = append(p.Connections, protocol.Connection{Name: c.Name, Type: c.Type,
				Config: rawObject(c.Config), SecretNames: sortedKeys(c.SecretRefs)})
		}
	}
	return p
}

// bindingName is a scope's binding as the engine names it.
func bindingName(scope, binding string) string { return scope + "/" + binding }

// tables are the engine's registrations for cfg: every admitted package's
// handlers, executors, work kinds, recurrences and operations, the routes
// and bindings of the enabled scopes, and the sources the packages
// registered in their last configure.
func (d *Daemon) tables(cfg *Config) runtime.Config {
	t := runtime.Config{
		Sources: map[string]runtime.Source{}, Routes: map[string][]runtime.Route{},
		Handlers: map[string]runtime.RouteHandler{}, Bindings: map[string]runtime.Binding{},
		Executors: map[string]runtime.Executor{}, WorkKinds: map[string]runtime.WorkKindPolicy{},
		Recurrences: map[string]runtime.Recurrence{}, Operations: map[string]runtime.OperationSpec{},
		Pools: map[string]int{},
	}
	for name, n := range cfg.Settings.Pools {
		t.Pools[name] = n
	}
	applyConcurrency(t.Pools, cfg.Settings)
	executorPools := map[string]string{}
	for _, pr := range d.packages() {
		p := pr.pkg.Manifest.Provides
		for _, x := range p.Executors {
			executorPools[x.Name] = runtimePool(x.Pool)
		}
		_, remote, executors := pr.parts()
		for _, r := range p.Routes {
			t.Handlers[r.Handler] = remote.RouteHandler(r.Handler)
		}
		for name, x := range executors {
			t.Executors[name] = x
		}
		for _, k := range p.WorkKinds {
			t.WorkKinds[k.Name] = remote.WorkKind(k.Name)
		}
		for _, r := range p.Recurrences {
			t.Recurrences[r.Name] = remote.Recurrence(r.Name)
		}
		for name, spec := range remote.Operations() {
			t.Operations[name] = spec
		}
		params := pr.params.Load()
		for _, src := range pr.svc.Sources() {
			typ, entry := sourceEntry(pr.pkg.Manifest, params, src)
			t.Sources[src.Name] = runtime.Source{ScopeID: src.ScopeID, Ingress: remote.Ingress(src, typ, entry)}
		}
	}
	for _, sc := range cfg.Scopes {
		if sc.Disabled {
			continue
		}
		for _, b := range sc.Bindings {
			rb := runtime.Binding{Executor: b.Executor, Pool: b.Pool, Connection: b.Connection,
				Config: rawObject(b.ExecutorConfig), Toolbelt: b.Toolbelt}
			if rb.Pool == "" {
				rb.Pool = executorPools[b.Executor]
			}
			if b.Toolbelt {
				rb.Operations = append(rb.Operations, b.Operations...)
				for _, ts := range b.Toolsets {
					rb.Operations = append(rb.Operations, d.catalogue().toolsets[ts]...)
				}
				slices.Sort(rb.Operations)
				rb.Operations = slices.Compact(rb.Operations)
			}
			t.Bindings[bindingName(sc.ID, b.Name)] = rb
		}
		routes := make([]runtime.Route, 0, len(sc.Routes))
		for i, r := range sc.Routes {
			name := r.ID
			if name == "" {
				name = "route-" + strconv.Itoa(i)
			}
			rr := runtime.Route{Name: name, Handler: r.Handler, Kind: r.Kind, Config: rawObject(r.Config)}
			if r.Binding != "" {
				rr.Binding = bindingName(sc.ID, r.Binding)
			}
			routes = append(routes, rr)
		}
		if len(routes) > 0 {
			t.Routes[sc.ID] = routes
		}
	}
	return t
}

// sourceEntry finds the ingress type and entry a registered source came
// from: the package's ingress entry in the source's scope (the first, when
// several share the scope).
func sourceEntry(m *protocol.Manifest, params *protocol.ConfigureParams, src protocol.SourceDecl) (typ, entry string) {
	ingress := map[string]bool{}
	for _, e := range m.Provides.Extensions {
		if e.Ingress {
			ingress[e.Type] = true
			if typ == "" {
				typ = e.Type
			}
		}
	}
	for _, e := range params.Entries {
		if ingress[e.Type] && (src.ScopeID == "" || e.ScopeID == src.ScopeID) {
			if strings.HasSuffix(src.Name, "/"+e.ID) || entry == "" {
				typ, entry = e.Type, e.ID
			}
		}
	}
	return typ, entry
}

// ---- generations in the store ----

func generationKey(n int64) string { return "gen/" + strconv.FormatInt(n, 10) }

const currentKey = "current"

// storeGeneration records doc as the next generation, or, when the latest
// stored one has the same hash (a restart with the same file), returns it.
// The configured scopes are written in the same transaction, so the store's
// scopes are always a generation's.
func (d *Daemon) storeGeneration(ctx context.Context, cfg *Config, doc []byte, hash string) (client.Generation, error) {
	var gen client.Generation
	err := d.store.Transact(ctx, func(tx runtime.Tx) error {
		for _, sc := range cfg.Scopes {
			if _, err := tx.PutScope(runtime.Scope{ID: sc.ID, Name: sc.Title,
				Config: jsonValue(map[string]bool{"disabled": sc.Disabled})}); err != nil {
				return err
			}
		}
		last, ok, err := readLastGeneration(tx)
		if err != nil {
			return err
		}
		if ok && last.Hash == hash {
			gen = last.Generation
			return nil
		}
		gen = client.Generation{Number: last.Number + 1, Hash: hash, AppliedAt: time.Now().UTC()}
		rec := storedGeneration{Generation: gen, Doc: storableDoc(doc)}
		return tx.KVCommit(runtime.KVBatch{Puts: []runtime.KVPut{
			jsonPut(generationKey(gen.Number), rec),
			jsonPut(currentKey, gen.Number),
		}})
	})
	return gen, err
}

// lastGeneration is the latest stored generation, if any.
func (d *Daemon) lastGeneration(ctx context.Context) (storedGeneration, bool, error) {
	var last storedGeneration
	var ok bool
	err := d.store.View(ctx, func(r runtime.ReadTx) error {
		var err error
		last, ok, err = readLastGeneration(r)
		return err
	})
	return last, ok, err
}
