package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
)

// withSpare runs f on a spare process of the package and kills it after.
func withSpare(ctx context.Context, d PackageDriver, f func(p RawPackage) error) error {
	p, err := d.Spawn(ctx)
	if err != nil {
		return fmt.Errorf("starting a spare process of the package: %w", err)
	}
	defer p.Kill()
	return f(p)
}

// CheckPackageHandshake checks the handshake on a spare process: a method
// before initialize is refused, initialize answers the highest protocol
// version both sides list, and configure is accepted after it. The
// supervised process must have completed its handshake too.
func CheckPackageHandshake(ctx context.Context, d PackageDriver) error {
	var errs []error
	if d.Generation() == 0 {
		errs = append(errs, errors.New("the host's handshake with the supervised process did not complete"))
	}
	m := d.Manifest()
	err := withSpare(ctx, d, func(p RawPackage) error {
		var errs []error
		err := p.Call(ctx, "configure", d.ConfigureParams(), nil)
		switch {
		case err == nil:
			errs = append(errs, errors.New("configure before initialize was accepted; no method but initialize is valid before it succeeds"))
		case !serving(err):
			return fmt.Errorf("configure before initialize: the package did not answer: %w", err)
		}
		var res protocol.InitializeResult
		if err := p.Call(ctx, "initialize", d.InitializeParams(), &res); err != nil {
			return errors.Join(append(errs, fmt.Errorf("initialize: %w", err))...)
		}
		want := highestCommon(d.InitializeParams().ProtocolVersions, m.Protocol)
		if res.ProtocolVersion != want {
			errs = append(errs, fmt.Errorf("initialize chose protocol version %d; the highest both sides list is %d (host %v, manifest %v)",
				res.ProtocolVersion, want, d.InitializeParams().ProtocolVersions, m.Protocol))
		}
		if err := p.Call(ctx, "configure", d.ConfigureParams(), nil); err != nil {
			errs = append(errs, fmt.Errorf("configure after initialize: %w", err))
		}
		return errors.Join(errs...)
	})
	return errors.Join(append(errs, err)...)
}

// CheckPackageVersionMismatch offers a version no package speaks on two
// fresh processes: each must refuse initialize with
// unsupported_protocol_version, before calling the host, the same way.
func CheckPackageVersionMismatch(ctx context.Context, d PackageDriver) error {
	const unknown = protocol.Version(999)
	params := d.InitializeParams()
	params.ProtocolVersions = []protocol.Version{unknown}
	var codes []protocol.Code
	var errs []error
	for attempt := 1; attempt <= 2; attempt++ {
		err := withSpare(ctx, d, func(p RawPackage) error {
			from := len(d.Wire())
			err := p.Call(ctx, "initialize", params, &protocol.InitializeResult{})
			if cbs := callbacks(decodeWire(d.Wire(), from)); len(cbs) > 0 {
				errs = append(errs, fmt.Errorf("attempt %d: the package called the host before refusing initialize: %s", attempt, describeCallbacks(cbs)))
			}
			switch {
			case err == nil:
				return fmt.Errorf("attempt %d: initialize offering only version %d was accepted", attempt, unknown)
			case !serving(err):
				return fmt.Errorf("attempt %d: initialize offering only version %d was not answered: %w", attempt, unknown, err)
			}
			codes = append(codes, protocol.CodeOf(err))
			if !errors.Is(err, protocol.ErrUnsupportedProtocolVersion) {
				return fmt.Errorf("attempt %d: initialize offering only version %d was refused with %s, not %s: %v",
					attempt, unknown, protocol.CodeOf(err), protocol.CodeUnsupportedProtocolVersion, err)
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(codes) == 2 && codes[0] != codes[1] {
		errs = append(errs, fmt.Errorf("the refusal is not deterministic: %s, then %s", codes[0], codes[1]))
	}
	return errors.Join(errs...)
}

// CheckPackageManifestMatch checks that the manifest initialize returns is
// the one in the package directory.
func CheckPackageManifestMatch(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		var res protocol.InitializeResult
		if err := p.Call(ctx, "initialize", d.InitializeParams(), &res); err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		got, err := protocol.DecodeManifest(res.Manifest)
		if err != nil {
			return fmt.Errorf("the manifest initialize returned does not parse: %w", err)
		}
		if !reflect.DeepEqual(got, d.Manifest()) {
			return fmt.Errorf("the manifest initialize returned differs from %s: %s", protocol.ManifestFile, manifestDiff(got, d.Manifest()))
		}
		return nil
	})
}

// manifestDiff names the top-level fields where two manifests differ.
func manifestDiff(got, want *protocol.Manifest) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gm, wm map[string]json.RawMessage
	_ = json.Unmarshal(g, &gm)
	_ = json.Unmarshal(w, &wm)
	var fields []string
	for k, v := range wm {
		if !sameJSON(v, gm[k]) {
			fields = append(fields, k)
		}
	}
	for k := range gm {
		if _, ok := wm[k]; !ok {
			fields = append(fields, k)
		}
	}
	if len(fields) == 0 {
		return "they differ"
	}
	return fmt.Sprintf("fields %v differ", fields)
}

// CheckPackageStdoutHygiene exercises the package, then checks that every
// line it wrote to stdout, on every process so far, was a JSON-RPC message.
// It reports the first line that was not, cut to 200 bytes.
func CheckPackageStdoutHygiene(ctx context.Context, d PackageDriver) error {
	if err := exercise(ctx, d); err != nil {
		return err
	}
	for _, m := range decodeWire(d.Wire(), 0) {
		if !m.fromExtension || m.json && (m.Method != "" || len(m.ID) > 0) {
			continue
		}
		return atWire(m.index, fmt.Errorf("the package wrote a line to stdout that is not a JSON-RPC message: %q", clipBytes(string(m.line), 200)))
	}
	return nil
}

// clipBytes cuts s to n bytes.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// shutdownRefusals is how many requests in a row certification has the
// package refuse shutting_down, while shutdown waits on the in-flight
// work it holds, before it lets that work end: one refusal shows
// shutdown begun, the next ones that it stays begun.
const shutdownRefusals = 3

// shutdownPollPause paces the requests certification sends while
// shutdown is unanswered: it bounds the load a package that never
// refuses is put under, and decides no verdict.
const shutdownPollPause = time.Millisecond

// CheckPackageShutdown sends shutdown to a spare process after its
// handshake: the package must answer it, refuse a new request with
// shutting_down (or have exited already) and exit on its own, with its
// stdin still open, within PackageExitBound of answering. When it declares
// an executor and speaks over a stream, an executor.wait is in flight as
// shutdown arrives, on a run certification holds until it lets it end:
// the wait must be answered (finished or cancelled), never dropped by the
// exit. Meanwhile certification sends requests one after another. The
// verdict rests on the wire's order alone, no clock: a request written
// after the package answered shutdown, or after it answered an earlier
// request written after shutdown, must not be served: only the first
// request written after shutdown may race shutdown's start (a package
// may serve it as read before), and the held run keeps the package there
// to be asked until it has refused shutdownRefusals of them.
func CheckPackageShutdown(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before shutdown: %w", err)
		}
		// Requests have an order only on a stream: in process, "after
		// shutdown" is not defined while shutdown is in flight, so only the
		// request after its answer is asked there.
		_, stream := p.(RawStdin)
		execs := d.Manifest().Provides.Executors
		var errs []error
		if len(execs) == 0 || !stream {
			if err := p.Call(ctx, "shutdown", protocol.Empty{}, nil); err != nil {
				return fmt.Errorf("shutdown was not answered: %w", err)
			}
		} else {
			held, err := holdRun(ctx, d, p, execs[0].Name)
			if err != nil {
				return fmt.Errorf("before shutdown: %w", err)
			}
			defer held.release()
			errs = append(errs, shutdownWhileHeld(ctx, d, p, held)...)
			if held.wait != nil {
				select {
				case err := <-held.wait:
					if !serving(err) {
						errs = append(errs, fmt.Errorf("the executor.wait in flight at shutdown was never answered: %v", err))
					}
				case <-time.After(PackageExitBound):
					errs = append(errs, errors.New("the executor.wait in flight at shutdown was never answered"))
				}
			}
		}
		err := p.Call(ctx, "configure", d.ConfigureParams(), nil)
		switch {
		case err == nil:
			errs = append(errs, errors.New("a request after shutdown was served; it must be refused shutting_down"))
		case errors.Is(err, protocol.ErrShuttingDown), errors.Is(err, jsonrpc.ErrTransport):
		default:
			errs = append(errs, fmt.Errorf("a request after shutdown was refused with %s, not %s: %v", protocol.CodeOf(err), protocol.CodeShuttingDown, err))
		}
		if !waitExit(ctx, p, PackageExitBound) {
			errs = append(errs, fmt.Errorf("the package did not exit within %v of shutdown", PackageExitBound))
		}
		return errors.Join(errs...)
	})
}

// heldRun is an executor run certification holds open: its command
// waits for a file certification creates when it releases the run, then
// removes the file's directory.
type heldRun struct {
	dir  string
	wait chan error // the answer to the executor.wait in flight on it
	once sync.Once
}

// release lets the run end.
func (h *heldRun) release() {
	h.once.Do(func() { _ = os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o644) })
}

// holdRun starts a held run on executor and an executor.wait on it, and
// returns once the wait is on the wire.
func holdRun(ctx context.Context, d PackageDriver, p RawPackage, executor string) (*heldRun, error) {
	dir, err := os.MkdirTemp("", "certify-shutdown-")
	if err != nil {
		return nil, err
	}
	h := &heldRun{dir: dir}
	// The run removes its directory once released, so a run an executor
	// leaves behind is not left waiting.
	cmd := fmt.Sprintf("until [ -e '%s' ]; do sleep 0.05; done; rm -rf '%s'; exit 0", filepath.Join(dir, "release"), dir)
	run := newRun(d, executor, fmt.Sprintf("shutdown-%d", time.Now().UnixNano()), cmd)
	if err := run.start(ctx, p, cmd); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	from := len(d.Wire())
	h.wait = make(chan error, 1)
	go func() {
		h.wait <- p.Call(ctx, "executor.wait", protocol.ExecutorWaitParams{Executor: run.executor, RunID: run.runID}, nil)
	}()
	// Shutdown must follow the wait on the stream: the wire records a
	// line as it is written, in order.
	if err := awaitSent(ctx, d, from, "executor.wait"); err != nil {
		h.release()
		return nil, err
	}
	return h, nil
}

// shutdownWhileHeld sends shutdown while held's wait is in flight and
// requests after it, one after another, and judges them by their order
// on the wire. It returns once shutdown is answered.
func shutdownWhileHeld(ctx context.Context, d PackageDriver, p RawPackage, held *heldRun) []error {
	var errs []error
	shut := make(chan error, 1)
	from := len(d.Wire())
	go func() { shut <- p.Call(ctx, "shutdown", protocol.Empty{}, nil) }()
	if err := awaitSent(ctx, d, from, "shutdown"); err != nil {
		return []error{err}
	}
	// bound ends the asking for a package that neither refuses nor
	// answers: by then the host would have sent SIGTERM and SIGKILL.
	bound := time.NewTimer(protocol.HostShutdownGrace + PackageExitBound)
	defer bound.Stop()
	served, refused, servedLate := 0, 0, 0
	answered := func() (error, bool) {
		select {
		case err := <-shut:
			return err, true
		default:
			return nil, false
		}
	}
	for {
		if err, ok := answered(); ok {
			if err != nil {
				return append(errs, fmt.Errorf("shutdown was not answered: %w", err))
			}
			return errs
		}
		if refused >= shutdownRefusals {
			// Shutdown has begun and stayed begun: let the held work end
			// and wait for the answer, asking nothing more.
			held.release()
			select {
			case err := <-shut:
				if err != nil {
					return append(errs, fmt.Errorf("shutdown was not answered: %w", err))
				}
				return errs
			case <-bound.C:
				return append(errs, fmt.Errorf("shutdown was not answered within %v of being sent, though the in-flight run it waited on was let end", protocol.HostShutdownGrace+PackageExitBound))
			}
		}
		err := p.Call(ctx, "configure", d.ConfigureParams(), nil)
		switch {
		case err == nil && served+refused > 0:
			// Written after the package answered a request it read after
			// shutdown: shutdown's start is behind it.
			if servedLate++; servedLate == 1 {
				errs = append(errs, fmt.Errorf("a request written after the package had answered an earlier one written after shutdown (%d served, %d refused shutting_down) was served; after shutdown only a request racing its start may be served", served, refused))
			}
			served++
		case err == nil:
			served++
		case errors.Is(err, protocol.ErrShuttingDown):
			refused++
		case errors.Is(err, jsonrpc.ErrTransport):
			// The package exited: its answer to shutdown decides.
			held.release()
			if err := <-shut; !serving(err) {
				return append(errs, fmt.Errorf("shutdown was not answered: %w", err))
			}
			return errs
		default:
			errs = append(errs, fmt.Errorf("a request while shutdown waited on in-flight work was refused with %s, not %s: %v", protocol.CodeOf(err), protocol.CodeShuttingDown, err))
			refused++
		}
		select {
		case <-time.After(shutdownPollPause):
		case <-bound.C:
			held.release()
			return append(errs, fmt.Errorf("shutdown was not answered within %v of being sent (%d requests written after it served, %d refused)", protocol.HostShutdownGrace+PackageExitBound, served, refused))
		}
	}
}

// awaitSent waits until the wire shows a request of method sent after
// line from.
func awaitSent(ctx context.Context, d PackageDriver, from int, method string) error {
	for {
		changed := d.WireChanged()
		for _, m := range decodeWire(d.Wire(), from) {
			if !m.fromExtension && m.request() && m.Method == method {
				return nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%s was not sent: %w", method, ctx.Err())
		}
	}
}

// CheckPackageStdinEOF closes a spare process's stdin after its handshake:
// the package must exit on its own within PackageExitBound.
func CheckPackageStdinEOF(ctx context.Context, d PackageDriver) error {
	return withSpare(ctx, d, func(p RawPackage) error {
		if err := handshake(ctx, d, p); err != nil {
			return fmt.Errorf("before closing stdin: %w", err)
		}
		if err := p.CloseStdin(); err != nil {
			return fmt.Errorf("closing stdin: %w", err)
		}
		if !waitExit(ctx, p, PackageExitBound) {
			return fmt.Errorf("the package kept running %v after its stdin reached EOF; it must exit so a crashed host leaves no orphan", PackageExitBound)
		}
		return nil
	})
}

// CheckPackageCrashRestart kills the supervised process: the host must
// restart it, the new process must complete initialize and configure, and
// it must serve calls again.
func CheckPackageCrashRestart(ctx context.Context, d PackageDriver) error {
	if err := d.Call(ctx, "configure", d.ConfigureParams(), nil); err != nil {
		return fmt.Errorf("before the crash, configure was not served: %w", err)
	}
	from := len(d.Wire())
	if err := crashAndRestart(ctx, d); err != nil {
		return err
	}
	var initialized, configured bool
	for _, m := range decodeWire(d.Wire(), from) {
		if m.fromExtension || !m.request() {
			continue
		}
		switch m.Method {
		case "initialize":
			initialized = true
		case "configure":
			configured = configured || initialized
		}
	}
	if !initialized || !configured {
		return errors.New("after the restart the wire shows no initialize followed by configure")
	}
	return nil
}
