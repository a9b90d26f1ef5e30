package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/host/daemon"
)

const serveDetails = `serve runs the daemon: the store, the engine and every package installed
under CONFIG/extensions/ or bundled beside the binary, configured from
CONFIG/config.json (no file: the empty configuration, no scopes). The
management API listens on STATE/api.sock. SIGHUP reloads config.json;
SIGTERM or SIGINT shuts down in order. One daemon runs per state
directory: a second one exits at once naming the holder's PID.

flags:
  --config DIR        the config directory (default $XDG_CONFIG_HOME/open-conduit,
                      else ~/.config/open-conduit)
  --state DIR         the state directory (default $XDG_STATE_HOME/open-conduit,
                      else ~/.local/state/open-conduit)
  --log-format FORMAT text or json (default text), on stderr
  --test-clock[=TIME] for tests only: run on a manual clock standing at TIME
                      (RFC 3339; default the time serve starts) that moves only
                      through POST /v1/clock/advance (client.AdvanceClock); the
                      daemon's timers, waits, leases and background passes run
                      on it
  --test-faults       for tests only: start every package behind the JSON-RPC fault
                      proxy and serve POST /v1/faults and DELETE /v1/faults/{package}
                      (client.InjectFault, client.ClearFaults) to script faults such
                      as "crash method=route.match nth=1" (the grammar: go doc
                      ./host/faultproxy)
  --test-wire-log     for tests only: record every package's JSON-RPC lines, both
                      directions, to STATE/logs/extensions/NAME.wire.jsonl (a line
                      kept up to 64 KiB, a file up to 16 MiB; secret.resolve
                      results and runs' toolbelt tokens redacted)
`

// shutdownBound bounds serve's orderly shutdown after SIGTERM.
const shutdownBound = 30 * time.Second

func serveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configDir := fs.String("config", "", "the config directory")
	stateDir := fs.String("state", "", "the state directory")
	logFormat := fs.String("log-format", "text", "text or json")
	var testClock testClockFlag
	fs.Var(&testClock, "test-clock", "for tests only: a manual clock standing at TIME (RFC 3339, default now)")
	testFaults := fs.Bool("test-faults", false, "for tests only: packages behind the fault proxy, faults scripted through the API")
	testWireLog := fs.Bool("test-wire-log", false, "for tests only: record every package's wire to STATE/logs/extensions/NAME.wire.jsonl")
	fs.Usage = func() { fmt.Fprint(fs.Output(), "usage: open-conduit serve [flags]\n\n"+serveDetails) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "open-conduit serve: takes no arguments, got %q\n", fs.Args())
		return exitUsage
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, nil)
	case "json":
		handler = slog.NewJSONHandler(stderr, nil)
	default:
		fmt.Fprintf(stderr, "open-conduit serve: --log-format is text or json, not %q\n", *logFormat)
		return exitUsage
	}
	logger := slog.New(handler)
	if *configDir == "" || *stateDir == "" {
		cfg, state, err := defaultDirs(os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "open-conduit serve: %v; give --config and --state\n", err)
			return exitUsage
		}
		if *configDir == "" {
			*configDir = cfg
		}
		if *stateDir == "" {
			*stateDir = state
		}
	}
	bundled, err := host.BundledRoot()
	if err != nil {
		bundled = ""
	}
	exe, _ := os.Executable()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var wire func(string) func(io.ReadCloser, io.WriteCloser) (io.ReadCloser, io.WriteCloser)
	if *testWireLog {
		wireLog := daemon.NewWireLog(filepath.Join(daemon.LogDir(*stateDir), "extensions"))
		defer wireLog.Close()
		wire = wireLog.Tap
	}
	d, err := daemon.Open(ctx, daemon.Options{ConfigDir: *configDir, StateDir: *stateDir, BundledDir: bundled,
		Executable: exe, Version: binaryVersion(), Logger: logger, Clock: testClock.clock(),
		TestFaults: *testFaults, Wire: wire})
	if err != nil {
		var locked *daemon.LockedError
		if errors.As(err, &locked) {
			fmt.Fprintf(stderr, "open-conduit serve: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stderr, "open-conduit serve: %v\n", err)
		return exitFail
	}
	st := d.Status(ctx)
	fmt.Fprintf(stdout, "  config:   %s\n", filepath.Join(st.Paths.Config, daemon.ConfigFile))
	fmt.Fprintf(stdout, "  state:    %s\n", st.Paths.State)
	fmt.Fprintf(stdout, "  API:      %s\n", st.Paths.Socket)
	fmt.Fprintf(stdout, "  webhooks: http://%s\n", st.Paths.Webhook)
	fmt.Fprintf(stdout, "  logs:     daemon on stderr, packages in %s\n", filepath.Join(st.Paths.Logs, "extensions"))
	if cs := d.ClockState(); cs.Manual {
		fmt.Fprintf(stdout, "  clock:    test clock at %s: it moves only through POST /v1/clock/advance\n", cs.Now.Format(time.RFC3339))
	}
	if *testFaults {
		fmt.Fprintf(stdout, "  faults:   test fault injection: every package behind the fault proxy, scripted through POST /v1/faults\n")
	}
	if *testWireLog {
		fmt.Fprintf(stdout, "  wire:     test wire log: every package's JSON-RPC lines in %s\n", daemon.WireLogPath(st.Paths.State, "NAME"))
	}
	for _, p := range st.Packages {
		fmt.Fprintf(stdout, "  package:  %s %s (%s, %s)\n", p.Name, p.Version, p.Origin, p.State)
	}
	// Last, so a reader that waits for it has the lines above.
	fmt.Fprintf(stdout, "open-conduit serve: ready (pid %d, generation %d)\n", os.Getpid(), st.Generation.Number)

	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx) }()
	for {
		select {
		case <-hup:
			gen, ds, err := d.Reload(ctx)
			switch {
			case err != nil:
				logger.Error("reload failed", "err", err)
			case len(ds) > 0:
				logger.Error("reload refused: the running generation keeps serving", "generation", gen.Number, "diagnostics", len(ds))
				for _, dg := range ds {
					logger.Error("configuration refused", "path", dg.Path, "rule", dg.Rule, "message", dg.Message)
				}
			default:
				logger.Info("reloaded", "generation", gen.Number, "hash", gen.Hash)
			}
		case err := <-runDone:
			logger.Info("shutting down")
			cctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
			cerr := d.Close(cctx)
			cancel()
			if err = errors.Join(err, cerr); err != nil {
				fmt.Fprintf(stderr, "open-conduit serve: %v\n", err)
				return exitFail
			}
			fmt.Fprintln(stdout, "open-conduit serve: stopped")
			return exitOK
		}
	}
}

// defaultDirs are the XDG base directories' open-conduit directories.
func defaultDirs(getenv func(string) string) (config, state string, err error) {
	home := getenv("HOME")
	config = getenv("XDG_CONFIG_HOME")
	if config == "" {
		if home == "" {
			return "", "", errors.New("neither XDG_CONFIG_HOME nor HOME is set")
		}
		config = filepath.Join(home, ".config")
	}
	state = getenv("XDG_STATE_HOME")
	if state == "" {
		if home == "" {
			return "", "", errors.New("neither XDG_STATE_HOME nor HOME is set")
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(config, "open-conduit"), filepath.Join(state, "open-conduit"), nil
}

// binaryVersion is the module version the binary was built at, "devel"
// for a build from a checkout.
func binaryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
