package packagetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/certify"
	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/runtime/sqlite"
)

// Scope is the scope the driver configures the package in, one entry per
// extension type the manifest declares, as certification does.
const Scope = "certify"

// Config describes the package to drive.
type Config struct {
	// Dir is the package directory; its manifest is the one the checks
	// hold the extension's initialize answer to.
	Dir string
	// New returns a fresh instance of the extension: one per supervised
	// start and per spare.
	New func() *sdk.Extension
	// StateDir is a fresh directory for the store and the package's
	// state.
	StateDir string
}

// Driver is the in-process conformance.PackageDriver.
type Driver struct {
	cfg      Config
	manifest *protocol.Manifest
	store    *sqlite.Store
	svc      *host.Service
	wire     recorder

	mu      sync.Mutex
	att     *host.Attached
	live    context.Context // ends when the instance is replaced
	replace context.CancelFunc
	gen     uint64
}

var (
	_ conformance.PackageDriver = (*Driver)(nil)
	_ conformance.RawPackage    = (*spare)(nil)
)

// Start opens the store and attaches the first instance, with its
// handshake. Close the Driver when done.
func Start(ctx context.Context, cfg Config) (*Driver, error) {
	m, err := protocol.LoadManifest(cfg.Dir)
	if err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, manifest: m}
	if err := os.MkdirAll(host.StateDir(cfg.StateDir, m.Name), 0o700); err != nil {
		return nil, err
	}
	if d.store, err = sqlite.Open(filepath.Join(cfg.StateDir, "store")); err != nil {
		return nil, err
	}
	d.svc = host.NewService(host.ServiceConfig{Manifest: m, Store: d.store, Blobs: d.store})
	if err := d.attach(ctx); err != nil {
		d.store.Close()
		return nil, err
	}
	return d, nil
}

// Close ends the instance and closes the store.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.replace != nil {
		d.replace()
	}
	d.mu.Unlock()
	return d.store.Close()
}

// attach starts a fresh instance, as a restarted process is: calls still
// in flight on the old one fail as over a broken pipe.
func (d *Driver) attach(ctx context.Context) error {
	ext, err := sdk.Attach(d.cfg.New(), d.wire.caller(true, d.svc))
	if err != nil {
		return err
	}
	recorded := d.wire.caller(false, ext)
	att, err := host.Attach(ctx, recorded, d.svc, d.cfg.StateDir, d.ConfigureParams())
	if err != nil {
		return err
	}
	live, replace := context.WithCancel(context.Background())
	d.mu.Lock()
	if d.replace != nil {
		d.replace()
	}
	d.att, d.live, d.replace = att, live, replace
	d.gen++
	d.mu.Unlock()
	return nil
}

// Manifest is the manifest in the package directory.
func (d *Driver) Manifest() *protocol.Manifest { return d.manifest }

// InitializeParams offers every version the host speaks, with the state
// and executor directories under StateDir.
func (d *Driver) InitializeParams() protocol.InitializeParams {
	return host.InitializeParams(d.cfg.StateDir, d.manifest)
}

// ConfigureParams has one entry per declared extension type in Scope.
func (d *Driver) ConfigureParams() protocol.ConfigureParams {
	p := protocol.ConfigureParams{Entries: []protocol.ConfigEntry{}, Connections: []protocol.Connection{}}
	for _, e := range d.manifest.Provides.Extensions {
		p.Entries = append(p.Entries, protocol.ConfigEntry{ScopeID: Scope, ID: "certify-" + e.Type, Type: e.Type, Config: json.RawMessage(`{}`)})
	}
	p.KV = protocol.KVLayout{Stored: d.manifest.KVVersion, Declared: d.manifest.KVVersion}
	return p
}

// Call calls the supervised instance through the host's attachment.
func (d *Driver) Call(ctx context.Context, method string, params, result any) error {
	d.mu.Lock()
	att, live := d.att, d.live
	d.mu.Unlock()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(live, stop)()
	err := att.Call(ctx, method, params, result)
	if live.Err() != nil {
		return fmt.Errorf("%w: the instance was replaced", jsonrpc.ErrTransport)
	}
	return err
}

// Wire is every message recorded so far: the attached instance's calls
// both ways, encoded as the lines they would be, and the spares' real
// lines.
func (d *Driver) Wire() []conformance.WireLine { return d.wire.Lines() }

// WireChanged is closed when the next line is recorded.
func (d *Driver) WireChanged() <-chan struct{} { return d.wire.Changed() }

// Generation counts the attached instances' handshakes.
func (d *Driver) Generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// Kill is a crash in process: the instance is dropped, its calls in
// flight fail, and a fresh one is attached with its handshake, as the
// host restarts a killed process.
func (d *Driver) Kill() error { return d.attach(context.Background()) }

// Restart replaces the instance with a fresh one.
func (d *Driver) Restart(ctx context.Context) error { return d.attach(ctx) }

// OpenRun opens an executor run with the host's service.
func (d *Driver) OpenRun(workID, executionID string) (string, func() json.RawMessage) {
	return d.svc.OpenRecordingRun(workID, executionID)
}

// Spawn serves a fresh instance with sdk.ServeConn over in-memory pipes,
// its calls to the host served by the same service.
func (d *Driver) Spawn(ctx context.Context) (conformance.RawPackage, error) {
	toExtR, toExtW := io.Pipe()
	fromExtR, fromExtW := io.Pipe()
	sctx, cancel := context.WithCancel(context.Background())
	sp := &spare{stdin: toExtW, stdout: fromExtR, cancel: cancel, exited: make(chan struct{})}
	ext := d.cfg.New()
	go func() {
		defer close(sp.exited)
		_ = sdk.ServeConn(sctx, toExtR, fromExtW, ext)
	}()
	sp.conn = jsonrpc.NewConn(d.wire.reader(fromExtR), d.wire.writer(toExtW), sp.gate.Handler(d.svc.Handler()), &jsonrpc.Options{DecodeError: sdk.DecodeError})
	return sp, nil
}

// spare is an instance Spawn serves.
type spare struct {
	conn   *jsonrpc.Conn
	gate   conformance.CallbackGate
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	cancel context.CancelFunc
	exited chan struct{}
}

func (s *spare) Call(ctx context.Context, method string, params, result any) error {
	return s.conn.Call(ctx, method, params, result)
}

func (s *spare) Notify(ctx context.Context, method string, params any) error {
	return s.conn.Notify(ctx, method, params)
}

func (s *spare) CloseStdin() error { return s.stdin.Close() }

// Intercept puts f in front of the service for the spare's calls.
func (s *spare) Intercept(f conformance.CallbackInterceptor) func() { return s.gate.Intercept(f) }

func (s *spare) Exited() <-chan struct{} { return s.exited }

// Kill ends the instance: its context ends and its streams close.
func (s *spare) Kill() error {
	s.cancel()
	s.stdin.Close()
	s.stdout.Close()
	s.conn.Close()
	select {
	case <-s.exited:
		return nil
	case <-time.After(conformance.PackageExitBound):
		return errors.New("the spare instance did not return after its context ended")
	}
}

// ---- the recorded wire ----

type recorder struct {
	conformance.WireLog
	mu   sync.Mutex
	next int64
}

// caller records each call c makes as the request and response lines it
// would be on the wire; byExtension says which side makes the calls. A
// call whose context ended records no response, as a cancelled request
// may get none.
func (r *recorder) caller(byExtension bool, c sdk.Caller) sdk.Caller {
	return sdk.CallerFunc(func(ctx context.Context, method string, params, result any) error {
		r.mu.Lock()
		r.next++
		id := r.next
		r.mu.Unlock()
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		r.Add(byExtension, req)
		err := c.Call(ctx, method, params, result)
		if ctx.Err() != nil {
			return err
		}
		resp := map[string]any{"jsonrpc": "2.0", "id": id}
		var perr *protocol.Error
		switch {
		case err == nil && result == nil:
			resp["result"] = nil
		case err == nil:
			resp["result"] = result
		case errors.As(err, &perr):
			msg, data := perr.WireData()
			resp["error"] = map[string]any{"code": perr.WireNumber(), "message": msg, "data": data}
		default:
			resp["error"] = map[string]any{"code": jsonrpc.CodeInternal, "message": err.Error()}
		}
		line, _ := json.Marshal(resp)
		r.Add(!byExtension, line)
		return err
	})
}

// reader records each line an instance writes.
func (r *recorder) reader(rc io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(rc, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				r.Add(true, line)
				if _, werr := pw.Write(line); werr != nil {
					rc.Close()
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// writer records each message the host writes (one per Write).
func (r *recorder) writer(wc io.WriteCloser) io.WriteCloser { return &tapWriter{r: r, w: wc} }

type tapWriter struct {
	r *recorder
	w io.WriteCloser
}

func (t *tapWriter) Write(p []byte) (int, error) {
	t.r.Add(false, p)
	return t.w.Write(p)
}

func (t *tapWriter) Close() error { return t.w.Close() }

// ---- running the checks ----

// InProcessChecks are the package checks that observe something of an
// instance in process: all but crash_restart (only a process crashes; in
// process Kill merely replaces the instance) and stdout_hygiene (in
// process nothing but the protocol reaches the recorded wire, so it
// cannot fail). stdin_eof stays: a spare served by sdk.ServeConn must
// return when its input ends.
func InProcessChecks() []conformance.PackageCheck {
	var out []conformance.PackageCheck
	for _, c := range conformance.PackageChecks() {
		switch c.Name {
		case "crash_restart", "stdout_hygiene":
			continue
		}
		out = append(out, c)
	}
	return out
}

// Run runs checks against d as named subtests, skipping a check with
// nothing to check in what the package offers, as conformance.RunPackage
// does.
func Run(t *testing.T, d conformance.PackageDriver, checks []conformance.PackageCheck) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Check(t.Context(), d)
			switch {
			case errors.Is(err, conformance.ErrNotApplicable):
				t.Skip(err)
			case err != nil:
				t.Error(err)
			}
		})
	}
}

// RunInProcess runs InProcessChecks against the package in dir, each of
// its instances made by newExt and attached to the real host in process.
func RunInProcess(t *testing.T, dir string, newExt func() *sdk.Extension) {
	t.Helper()
	d, err := Start(t.Context(), Config{Dir: dir, New: newExt, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	Run(t, d, InProcessChecks())
}

// RunAsProcess runs every package check against the package in dir,
// started by the real host as a subprocess of executable, as
// certification starts it. An empty executable is the running test
// binary, whose TestMain must then serve `extension-run NAME` for a
// package whose command is protocol.HostRunCommand.
func RunAsProcess(t *testing.T, dir, executable string) {
	t.Helper()
	m, err := protocol.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := certify.HostLaunch(executable)(t.Context(), certify.LaunchSpec{Dir: dir, Manifest: m, StateDir: t.TempDir()})
	if err == nil {
		err = p.Start(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	d, ok := p.(conformance.PackageDriver)
	if !ok {
		t.Fatal("certify's host-backed package is not a conformance.PackageDriver")
	}
	Run(t, d, conformance.PackageChecks())
}
