package daemon

import (
	"context"
	"fmt"
	"io"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// newProcess makes pr a new supervised process (not started), with the
// adapters over it, on pr's service.
func (d *Daemon) newProcess(pr *pkgRun) error {
	p := pr.pkg
	var wire func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser)
	if d.opts.Wire != nil {
		wire = d.opts.Wire(p.Name)
	}
	proc, err := host.NewProcess(host.Config{
		Package: p, StateRoot: d.opts.StateDir, PassEnv: pr.passEnv,
		Environ: d.environ, Executable: d.opts.Executable, HostVersion: d.opts.Version,
		Service: pr.svc, Store: d.store,
		Configure: func() protocol.ConfigureParams { return *pr.params.Load() },
		Logf: func(format string, args ...any) {
			d.log.Info(fmt.Sprintf(format, args...), "package", p.Name)
		},
		ShutdownGrace: d.opts.ShutdownGrace, TermGrace: d.opts.TermGrace,
		ReapTimeout: d.opts.ReapTimeout, StartTimeout: d.opts.StartTimeout, Wire: wire,
		Interpose: d.interposer(p.Name),
	})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	go d.watchProcess(p.Name, proc)
	remote := host.NewRemote(proc)
	executors := map[string]runtime.Executor{}
	for _, e := range p.Manifest.Provides.Executors {
		executors[e.Name] = remote.Executor(e.Name)
	}
	pr.mu.Lock()
	pr.proc, pr.remote, pr.executors = proc, remote, executors
	pr.mu.Unlock()
	return nil
}

func (d *Daemon) pkgRun(name string) (*pkgRun, error) {
	for _, pr := range d.packages() {
		if pr.pkg.Name == name {
			return pr, nil
		}
	}
	return nil, fmt.Errorf("daemon: no admitted package %q", name)
}

// Package is an admitted package's current process and host service, for
// a driver that works one package directly (certification); false when no
// admitted package has the name.
func (d *Daemon) Package(name string) (*host.Process, *host.Service, bool) {
	pr, err := d.pkgRun(name)
	if err != nil {
		return nil, nil, false
	}
	proc, _, _ := pr.parts()
	return proc, pr.svc, true
}

// ClosePackage stops an admitted package's process for good (until
// RestartPackage): hurry skips shutdown, for a process that may hang.
func (d *Daemon) ClosePackage(ctx context.Context, name string, hurry bool) error {
	pr, err := d.pkgRun(name)
	if err != nil {
		return err
	}
	proc, _, _ := pr.parts()
	return proc.Close(closeContext(ctx, hurry))
}

// StartPackage starts an admitted package that was composed without a
// start (Options.Deferred) or closed (ClosePackage), and returns its
// start's error; a running package is restarted.
func (d *Daemon) StartPackage(ctx context.Context, name string) error {
	pr, err := d.pkgRun(name)
	if err != nil {
		return err
	}
	proc, _, _ := pr.parts()
	if st, _, _ := proc.Status(); st == host.Stopped {
		return proc.Start(ctx)
	}
	return d.RestartPackage(ctx, name, false)
}

// RestartPackage ends an admitted package's process (hurry skips
// shutdown) and starts a new one on the same service and store, returning
// its start's error. The engine gets the new process's adapters; runs the
// old process's executors observed are left to recovery.
func (d *Daemon) RestartPackage(ctx context.Context, name string, hurry bool) error {
	pr, err := d.pkgRun(name)
	if err != nil {
		return err
	}
	old, _, _ := pr.parts()
	_ = old.Close(closeContext(ctx, hurry))
	if err := d.newProcess(pr); err != nil {
		return err
	}
	proc, _, _ := pr.parts()
	startErr := proc.Start(ctx)
	d.mu.Lock()
	cfg := d.current
	d.mu.Unlock()
	if err := d.engine.Reconfigure(d.tables(cfg)); err != nil {
		return err
	}
	d.syncSourcePasses()
	return startErr
}

// closeContext is ctx without its cancellation, or, with hurry, already
// ended: an ended context makes Process.Close skip shutdown.
func closeContext(ctx context.Context, hurry bool) context.Context {
	cctx := context.WithoutCancel(ctx)
	if hurry {
		c, cancel := context.WithCancel(cctx)
		cancel()
		return c
	}
	return cctx
}
