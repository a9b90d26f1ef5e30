package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/host/faultproxy"
)

// Fault injection for tests and drills (serve --test-faults,
// Options.TestFaults): every package's process is started behind a
// host/faultproxy Proxy, one per package name, so rules armed through
// POST /v1/faults (or InjectFault) hold across the package's restarts.
// Without the option no proxy exists and the host's pipes are untouched.

// faultSet is the daemon's fault proxies, by package.
type faultSet struct {
	log *slog.Logger

	mu      sync.Mutex
	proxies map[string]*faultproxy.Proxy
}

func newFaultSet(log *slog.Logger) *faultSet {
	return &faultSet{log: log, proxies: map[string]*faultproxy.Proxy{}}
}

// proxy is pkg's proxy, made at its first use.
func (f *faultSet) proxy(pkg string) *faultproxy.Proxy {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.proxies[pkg]
	if !ok {
		p = faultproxy.New(faultproxy.Options{Logf: func(format string, args ...any) {
			f.log.Warn("test fault: "+fmt.Sprintf(format, args...), "package", pkg)
		}})
		f.proxies[pkg] = p
	}
	return p
}

// interposer is what host.Config.Interpose gets for pkg: its proxy under
// --test-faults, nil (nothing interposed) otherwise.
func (d *Daemon) interposer(pkg string) func(int, io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser) {
	if d.faults == nil {
		return nil
	}
	return d.faults.proxy(pkg).Interpose
}

// faultProxy is the proxy of the admitted package pkg, refusing when the
// daemon runs without fault injection or has no such package.
func (d *Daemon) faultProxy(pkg string) (*faultproxy.Proxy, error) {
	if d.faults == nil {
		return nil, client.Errorf(client.CodeConflict, "this daemon runs without fault injection: start serve with --test-faults")
	}
	if _, err := d.pkgRun(pkg); err != nil {
		return nil, client.Errorf(client.CodeNotFound, "no admitted package %q", clipForMessage(pkg))
	}
	return d.faults.proxy(pkg), nil
}

// InjectFault arms rule (host/faultproxy's grammar) on the proxy of the
// package pkg; it takes effect on the next message it matches.
func (d *Daemon) InjectFault(pkg, rule string) (client.FaultState, error) {
	p, err := d.faultProxy(pkg)
	if err != nil {
		return client.FaultState{}, err
	}
	r, err := faultproxy.ParseRule(rule)
	if err != nil {
		return client.FaultState{}, client.Errorf(client.CodeInvalidRequest, "%v", err)
	}
	p.Add(r)
	d.log.Info("test fault armed", "package", pkg, "rule", r.String())
	return faultState(pkg, p), nil
}

// ClearFaults disarms every rule of pkg and ends its stalls.
func (d *Daemon) ClearFaults(pkg string) (client.FaultState, error) {
	p, err := d.faultProxy(pkg)
	if err != nil {
		return client.FaultState{}, err
	}
	p.Clear()
	d.log.Info("test faults cleared", "package", pkg)
	return faultState(pkg, p), nil
}

// Faults is pkg's armed rules with what each has done.
func (d *Daemon) Faults(pkg string) (client.FaultState, error) {
	p, err := d.faultProxy(pkg)
	if err != nil {
		return client.FaultState{}, err
	}
	return faultState(pkg, p), nil
}

func faultState(pkg string, p *faultproxy.Proxy) client.FaultState {
	st := client.FaultState{Package: pkg, Rules: []client.FaultRule{}}
	for _, r := range p.Rules() {
		st.Rules = append(st.Rules, client.FaultRule{Rule: r.Rule.String(), Counted: r.Counted, Fired: r.Fired})
	}
	return st
}

// faultBackend is what the fault routes need; a backend without it (a
// test's) answers not_found.
type faultBackend interface {
	InjectFault(pkg, rule string) (client.FaultState, error)
	ClearFaults(pkg string) (client.FaultState, error)
	Faults(pkg string) (client.FaultState, error)
}

func (a *api) faultBackend() (faultBackend, error) {
	fb, ok := a.b.(faultBackend)
	if !ok {
		return nil, client.Errorf(client.CodeNotFound, "this daemon serves no fault injection")
	}
	return fb, nil
}

func (a *api) injectFault(w http.ResponseWriter, r *http.Request) error {
	fb, err := a.faultBackend()
	if err != nil {
		return err
	}
	body, err := readBody(w, r, maxRequestBody)
	if err != nil {
		return err
	}
	var req client.FaultInjection
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Package == "" || req.Rule == "" {
		return client.Errorf(client.CodeInvalidRequest, "a fault needs a \"package\" and a \"rule\"")
	}
	st, err := fb.InjectFault(req.Package, req.Rule)
	if err != nil {
		return err
	}
	return ok(w, st)
}

func (a *api) faults(w http.ResponseWriter, r *http.Request) error {
	fb, err := a.faultBackend()
	if err != nil {
		return err
	}
	st, err := fb.Faults(r.PathValue("package"))
	if err != nil {
		return err
	}
	return ok(w, st)
}

func (a *api) clearFaults(w http.ResponseWriter, r *http.Request) error {
	fb, err := a.faultBackend()
	if err != nil {
		return err
	}
	st, err := fb.ClearFaults(r.PathValue("package"))
	if err != nil {
		return err
	}
	return ok(w, st)
}
