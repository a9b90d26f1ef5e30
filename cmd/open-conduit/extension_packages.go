package main

// The packaging commands: extension install, update, rollback and remove
// change the install tree (host/packages) and, when a daemon runs, have it
// reload the package through its API; extension list and inspect read
// the tree and, when a daemon answers, its status.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/daemon"
	"github.com/open-conduit/open-conduit/host/packages"
	"github.com/open-conduit/open-conduit/protocol"
)

// pkgFlagsHelp documents the flags every packaging command takes.
const pkgFlagsHelp = `  --config DIR	the config directory (default $XDG_CONFIG_HOME/open-conduit, else
		~/.config/open-conduit); packages live in DIR/extensions/
  --state DIR	the daemon's state directory (default $XDG_STATE_HOME/open-conduit,
		else ~/.local/state/open-conduit), for the recorded KV layouts and the API
  --socket PATH	the running daemon's API socket (overrides --state's)
  --json	print the result as JSON
`

// pkgChangeHelp documents what install, update and rollback add.
const pkgChangeHelp = `  --yes		consent without asking (for scripts); without it the command asks on
		the terminal, and refuses (exit 1) when stdin is not one
`

// pkgExitHelp says how a packaging command exits.
const pkgExitHelp = `Exit status: 0 on success, 1 when the change was refused (the reason's code is in
--json's "code") or the daemon could not start the package, 2 for a usage error.
`

// testHoldEnv, for tests only, stops a packaging change at a hold point:
// "POINT=FIFO" writes POINT to the FIFO there and then waits on it, so a
// test can kill the process at that step (a crash between staging and
// rename).
const testHoldEnv = "OPEN_CONDUIT_TEST_PACKAGE_HOLD"

// consentInput is where a consent answer is read; isTerminal says whether
// it is a terminal (variables, so tests can answer).
var (
	consentInput io.Reader = os.Stdin
	isTerminal             = stdinIsTerminal
)

// pkgCommand is a packaging command: the operator flags plus the config
// directory.
type pkgCommand struct {
	*opsCommand
	config string
	yes    bool
}

func newPkg(name string, stdout, stderr io.Writer, consent bool) *pkgCommand {
	o := &pkgCommand{opsCommand: newOps(name, stdout, stderr)}
	o.fs.StringVar(&o.config, "config", "", "config directory")
	if consent {
		o.fs.BoolVar(&o.yes, "yes", false, "consent without asking")
	}
	return o
}

func (o *pkgCommand) configDir() (string, error) {
	if o.config != "" {
		return o.config, nil
	}
	cfg, _, err := defaultDirs(os.Getenv)
	if err != nil {
		return "", fmt.Errorf("no config directory: pass --config: %w", err)
	}
	return cfg, nil
}

func (o *pkgCommand) stateDir() (string, error) {
	if o.state != "" {
		return o.state, nil
	}
	return defaultStateDir()
}

// openTree opens the install tree (recovering a change a crash left).
func (o *pkgCommand) openTree() (*packages.Tree, error) {
	cfg, err := o.configDir()
	if err != nil {
		return nil, err
	}
	bundled, err := host.BundledRoot()
	if err != nil {
		bundled = ""
	}
	t, err := packages.Open(filepath.Join(cfg, "extensions"), bundled)
	if err != nil {
		return nil, err
	}
	t.Hold = testHold()
	return t, nil
}

func testHold() func(string) {
	point, fifo, ok := strings.Cut(os.Getenv(testHoldEnv), "=")
	if !ok {
		return nil
	}
	return func(p string) {
		if p != point {
			return
		}
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(f, p)
			f.Close()
		}
		// Held until the test kills the process (or writes to release it).
		if f, err := os.Open(fifo); err == nil {
			_, _ = io.ReadAll(f)
			f.Close()
		}
	}
}

// daemonClient is a client of the running daemon, or nil when none runs
// (no socket, or one nobody answers on).
func (o *pkgCommand) daemonClient(ctx context.Context) *client.Client {
	sock, err := o.socketPath()
	if err != nil {
		return nil
	}
	if _, err := os.Stat(sock); err != nil {
		return nil
	}
	c := client.New(sock)
	if _, err := c.Status(ctx); err != nil {
		c.Close()
		return nil
	}
	return c
}

// kvLayouts are the KV layouts the store records: read from the state
// directory under its lock when no daemon holds it, else asked of the
// daemon that does.
func (o *pkgCommand) kvLayouts(ctx context.Context) (map[string]int, error) {
	state, err := o.stateDir()
	if err != nil {
		return nil, err
	}
	layouts, err := daemon.ReadKVLayouts(ctx, state)
	if !errors.Is(err, daemon.ErrLocked) {
		return layouts, err
	}
	c := o.daemonClient(ctx)
	if c == nil {
		return nil, fmt.Errorf("a daemon holds %s but its API does not answer: cannot read the recorded KV layouts", state)
	}
	defer c.Close()
	return c.KVLayouts(ctx)
}

// configDoc is the configuration file, parsed ("" config: none).
func (o *pkgCommand) configDoc() (*daemon.Config, error) {
	cfg, err := o.configDir()
	if err != nil {
		return nil, err
	}
	doc, _, err := daemon.ReadConfigFile(cfg)
	if err != nil {
		return nil, err
	}
	c, ds := daemon.ParseConfig(doc)
	if len(ds) > 0 {
		return nil, fmt.Errorf("%s: %s: %s", filepath.Join(cfg, daemon.ConfigFile), ds[0].Path, ds[0].Message)
	}
	return c, nil
}

// changeResult is what install, update, rollback and remove print with
// --json.
type changeResult struct {
	OK bool `json:"ok"`
	// Code names the refusal (host/packages' codes), empty on success.
	Code    packages.Code `json:"code,omitempty"`
	Message string        `json:"message,omitempty"`
	// Uses lists where the configuration uses a package remove refused.
	Uses        []string              `json:"uses,omitempty"`
	Record      *packages.Record      `json:"record,omitempty"`
	Description *packages.Description `json:"description,omitempty"`
	// Reload is the running daemon's reload, absent without a daemon.
	Reload *client.PackageReload `json:"reload,omitempty"`
}

// refuse reports a refused change and returns exitFail.
func (o *pkgCommand) refuse(res changeResult, err error) int {
	res.OK, res.Code, res.Message = false, packages.CodeOf(err), err.Error()
	if o.json {
		o.writeJSON(res)
	}
	fmt.Fprintf(o.stderr, "open-conduit %s: %v\n", o.name, err)
	for _, u := range res.Uses {
		fmt.Fprintf(o.stderr, "  %s\n", u)
	}
	return exitFail
}

func (o *pkgCommand) writeJSON(v any) {
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (o *pkgCommand) progress(format string, args ...any) {
	if !o.json {
		fmt.Fprintf(o.stderr, format+"\n", args...)
	}
}

// describe is m's description for consent, with the pass_env the
// configuration grants it.
func (o *pkgCommand) describe(m *protocol.Manifest, digest, dir, origin string) packages.Description {
	d := packages.Describe(m)
	d.Digest, d.Dir, d.Origin = digest, dir, origin
	if cfg, err := o.configDoc(); err == nil {
		d.PassEnv = append(d.PassEnv, cfg.Settings.PassEnv[m.Name]...)
	}
	return d
}

// consent shows what the package declares and asks; --yes answers for
// the operator, and with no terminal to ask on the change is refused.
func (o *pkgCommand) consent(verb string, d packages.Description) error {
	if !o.json {
		d.WriteText(o.stdout)
	}
	if o.yes {
		return nil
	}
	if !isTerminal() {
		return fmt.Errorf("%w: stdin is not a terminal to ask on; read what the package declares above and pass --yes to %s it", packages.ErrNoConsent, verb)
	}
	fmt.Fprintf(o.stderr, "%s %s %s with these surfaces and permissions? [y/N] ", strings.ToUpper(verb[:1])+verb[1:], d.Name, d.Version)
	answer, _ := bufio.NewReader(consentInput).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: the operator declined", packages.ErrNoConsent)
}

// reload has a running daemon pick up the change to name; it reports
// false when the daemon could not start the package.
func (o *pkgCommand) reload(ctx context.Context, res *changeResult, name string, removed bool) bool {
	c := o.daemonClient(ctx)
	if c == nil {
		o.progress("no daemon answers: the next `open-conduit serve` picks the change up")
		return true
	}
	defer c.Close()
	o.progress("reloading %s in the running daemon…", name)
	rl, err := c.ReloadPackages(ctx, []string{name})
	if err != nil {
		fmt.Fprintf(o.stderr, "open-conduit %s: the daemon did not reload the packages: %v\n", o.name, err)
		return false
	}
	res.Reload = &rl
	for _, w := range rl.Warnings {
		o.progress("note: %s", w)
	}
	for _, p := range rl.Packages {
		if p.Name != name {
			continue
		}
		if removed {
			o.progress("the daemon now runs the %s %s of %s (%s)", p.Origin, p.Version, name, p.State)
			return p.State == "ready"
		}
		if p.State != "ready" {
			fmt.Fprintf(o.stderr, "open-conduit %s: the daemon could not start %s: %s %s\n", o.name, name, p.State, p.LastError)
			return false
		}
		o.progress("the daemon runs %s %s (protocol %d)", name, p.Version, p.Protocol)
	}
	return true
}

func (o *pkgCommand) done(res changeResult, ok bool, line string) int {
	res.OK = ok
	if o.json {
		o.writeJSON(res)
	} else {
		fmt.Fprintln(o.stdout, line)
	}
	if !ok {
		return exitFail
	}
	return exitOK
}

// ---- install, update ----

func extensionInstallCommand(args []string, stdout, stderr io.Writer) int {
	return stageCommand("extension install", packages.OpInstall, args, stdout, stderr)
}

func extensionUpdateCommand(args []string, stdout, stderr io.Writer) int {
	return stageCommand("extension update", packages.OpUpdate, args, stdout, stderr)
}

// stageCommand is install and update: stage SOURCE, check it, ask,
// commit, reload.
func stageCommand(name, op string, args []string, stdout, stderr io.Writer) int {
	o := newPkg(name, stdout, stderr, true)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	ctx, cancel := opsContext()
	defer cancel()
	var res changeResult
	tree, err := o.openTree()
	if err != nil {
		return o.refuse(res, err)
	}
	defer tree.Close()
	o.progress("staging %s…", o.args[0])
	staged, err := tree.Stage(o.args[0])
	if err != nil {
		return o.refuse(res, err)
	}
	defer staged.Discard()
	m := staged.Manifest
	d := o.describe(m, staged.Digest, staged.Source, "source")
	res.Description = &d
	switch installed := tree.Installed(m.Name); {
	case op == packages.OpInstall && installed:
		return o.refuse(res, fmt.Errorf("%w: %s is installed in %s; use `open-conduit extension update %s`", packages.ErrInstalled, m.Name, tree.Dir(m.Name), o.args[0]))
	case op == packages.OpUpdate && !installed:
		return o.refuse(res, fmt.Errorf("%w: %s; use `open-conduit extension install %s`", packages.ErrNotInstalled, m.Name, o.args[0]))
	}
	o.progress("checking %s against every installed and bundled package…", m.Name)
	if err := tree.CheckConflicts(m); err != nil {
		return o.refuse(res, err)
	}
	layouts, err := o.kvLayouts(ctx)
	if err != nil {
		return o.refuse(res, err)
	}
	if err := packages.CheckKV(m, layouts[m.Name]); err != nil {
		return o.refuse(res, err)
	}
	if err := o.consent(op, d); err != nil {
		return o.refuse(res, err)
	}
	rec, err := tree.Commit(staged, op)
	if err != nil {
		return o.refuse(res, err)
	}
	res.Record = &rec
	line := fmt.Sprintf("%sed %s %s (%s) in %s", strings.TrimSuffix(op, "e"), m.Name, m.Version, rec.Digest, tree.Dir(m.Name))
	if rec.Previous != nil {
		line += fmt.Sprintf("; %s kept for rollback", rec.Previous.Version)
	}
	return o.done(res, o.reload(ctx, &res, m.Name, false), line)
}

// ---- rollback ----

func extensionRollbackCommand(args []string, stdout, stderr io.Writer) int {
	o := newPkg("extension rollback", stdout, stderr, true)
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	ctx, cancel := opsContext()
	defer cancel()
	var res changeResult
	name := o.args[0]
	tree, err := o.openTree()
	if err != nil {
		return o.refuse(res, err)
	}
	defer tree.Close()
	if !tree.Installed(name) {
		return o.refuse(res, fmt.Errorf("%w: %s", packages.ErrNotInstalled, name))
	}
	prev, m, err := tree.Previous(name)
	if err != nil {
		return o.refuse(res, err)
	}
	d := o.describe(m, prev.Digest, tree.PreviousDir(name), "previous release")
	res.Description = &d
	layouts, err := o.kvLayouts(ctx)
	if err != nil {
		return o.refuse(res, err)
	}
	if err := packages.CheckKV(m, layouts[name]); err != nil {
		return o.refuse(res, fmt.Errorf("rollback refused: the installed release migrated KV: %w", err))
	}
	if err := o.consent("roll back to", d); err != nil {
		return o.refuse(res, err)
	}
	rec, err := tree.Rollback(name)
	if err != nil {
		return o.refuse(res, err)
	}
	res.Record = &rec
	line := fmt.Sprintf("rolled %s back to %s (%s)", name, rec.Version, rec.Digest)
	if rec.Previous != nil {
		line += fmt.Sprintf("; %s kept as the previous release", rec.Previous.Version)
	}
	return o.done(res, o.reload(ctx, &res, name, false), line)
}

// ---- remove ----

func extensionRemoveCommand(args []string, stdout, stderr io.Writer) int {
	o := newPkg("extension remove", stdout, stderr, false)
	var force bool
	o.fs.BoolVar(&force, "force", false, "remove even when the configuration uses it")
	if !o.parse(args, 1, 1) {
		return exitUsage
	}
	ctx, cancel := opsContext()
	defer cancel()
	var res changeResult
	name := o.args[0]
	tree, err := o.openTree()
	if err != nil {
		return o.refuse(res, err)
	}
	defer tree.Close()
	if !tree.Installed(name) {
		return o.refuse(res, fmt.Errorf("%w: %s (a bundled package cannot be removed, only replaced)", packages.ErrNotInstalled, name))
	}
	if _, m, err := packages.ReleaseAt(tree.Dir(name)); err == nil {
		uses, err := o.uses(ctx, m)
		if err != nil {
			return o.refuse(res, err)
		}
		if len(uses) > 0 && !force {
			res.Uses = uses
			return o.refuse(res, fmt.Errorf("%w: the configuration uses %s in %d places; change it first, or pass --force", packages.ErrInUse, name, len(uses)))
		}
	}
	// The bundled release that comes back must be able to run on the KV
	// the installed one migrated.
	if bundled, err := host.BundledRoot(); err == nil && !force {
		if _, bm, err := packages.ReleaseAt(filepath.Join(bundled, name)); err == nil {
			layouts, err := o.kvLayouts(ctx)
			if err != nil {
				return o.refuse(res, err)
			}
			if err := packages.CheckKV(bm, layouts[name]); err != nil {
				return o.refuse(res, fmt.Errorf("removing %s brings back the bundled release, which would not start: %w (or pass --force)", name, err))
			}
		}
	}
	rec, err := tree.Remove(name)
	if err != nil {
		return o.refuse(res, err)
	}
	res.Record = &rec
	line := fmt.Sprintf("removed %s %s", name, rec.Version)
	if bundled, err := host.BundledRoot(); err == nil {
		if _, err := os.Stat(filepath.Join(bundled, name, protocol.ManifestFile)); err == nil {
			line += "; the bundled " + name + " is back"
		}
	}
	return o.done(res, o.reload(ctx, &res, name, true), line)
}

// uses lists where the configuration file, and the running daemon's
// generation when one answers, use m.
func (o *pkgCommand) uses(ctx context.Context, m *protocol.Manifest) ([]string, error) {
	cfg, err := o.configDoc()
	if err != nil {
		return nil, err
	}
	uses := daemon.PackageUses(cfg, m)
	c := o.daemonClient(ctx)
	if c == nil {
		return uses, nil
	}
	defer c.Close()
	view, err := c.Config(ctx)
	if err != nil {
		return nil, err
	}
	running, ds := daemon.ParseConfig(view.Config)
	if len(ds) > 0 {
		return uses, nil
	}
	for _, u := range daemon.PackageUses(running, m) {
		if !containsString(uses, u) {
			uses = append(uses, fmt.Sprintf("%s (the running generation %d)", u, view.Generation.Number))
		}
	}
	return uses, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const extensionInstallDetails = `SOURCE is a package directory (holding open-conduit-extension.json) or a .tar.gz of one
(the manifest at its top or in its one directory). The manifest is validated offline and
the package's names checked against every installed and bundled package; then what it
declares (surfaces, the methods the host will call, permissions and what each allows,
schemas, kv_version, the pass_env the configuration grants it) is shown and you are asked
to consent. It is staged in CONFIG/extensions/.staging/ and renamed into
CONFIG/extensions/NAME/, so a crash leaves no half-installed package; the ledger
CONFIG/extensions/.ledger.json records it. A running daemon starts it without restarting
the other packages.

flags:
` + pkgChangeHelp + pkgFlagsHelp + pkgExitHelp

const extensionBundleDetails = `DIR gets a copy of this binary, DIR/open-conduit, and DIR/extensions/NAME/ for every
extension the binary serves itself (` + "`open-conduit extension-run NAME`" + `): the release
layout. The copy discovers them as its bundled packages, after the installed ones.

flags:
  --json	print what was written as JSON
` + opsExitHelp
