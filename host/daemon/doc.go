// Package daemon is the composition root behind `open-conduit serve` and
// certification: one function (Open) composes the SQLite store in the
// state directory, the runtime engine over it, every discovered package
// (installed under <config>/extensions/, then bundled beside the binary,
// checked for conflicts as one set) as a supervised host.Process with its
// host.Service and the host.Remote adapters registered into the engine,
// the operator's configuration and the management API on
// <state>/api.sock.
//
// The configuration (config.json, Config) is read strictly and validated
// whole: every reference against what the admitted packages declare, and
// every entry, route config, binding, executor config and connection by
// its own package's validate, with every diagnostic reported (path, rule,
// message). A valid document is applied as a numbered generation stored
// in the reserved core.daemon namespace: each package is configured again
// with its part (secret names only) and the engine's tables are replaced
// at once (runtime.Engine.Reconfigure), without a restart; running
// executions go on. A refused document changes nothing.
//
// The webhook listener (loopback HTTP at settings.webhooks.listen, default
// 127.0.0.1:0) hands a request under a path a package registered in
// configure to that package's webhook.handle and answers 2xx only once
// every Event it yields is durably accepted, concurrent deliveries sharing
// a commit; a refusal is 4xx with the package's reason, and a crash, a
// timeout or a store failure 5xx with nothing accepted (MaxWebhookBody,
// WebhookConcurrency and WebhookTimeout bound it).
//
// Executions run Work on its binding's executor with the binding's
// executor config, within the pool limits (settings.concurrency for agent
// turns, settings.job_concurrency for jobs), under leases the engine
// renews while a run is alive. A binding that grants the toolbelt gives
// each attempt the endpoint <state>/toolbelt.sock (HTTP on a unix socket,
// mode 0600) and a token for that attempt at its lease epoch; a call
// reaches the operations the binding grants and no others (toolbelt.go).
//
// The daemon's clock (Options.Clock) is its one source of logical time:
// the engine's timers, waits, retries and leases, and the background
// passes Run drives on it (passes.go): each package's declared tasks at
// their intervals, and a reconcile scan of each registered ingress source
// at its reconcile_interval (default ReconcileInterval). A pass never runs
// twice at once; an overrun is counted in Status and logged, and the next
// run waits for it. serve --test-clock runs on a ManualClock that the API
// moves (POST /v1/clock/advance), so all of this is tested without sleeps.
//
// CheckOffline is the same validation with no daemon and no store
// (`open-conduit config check`): a package is started, for validate alone,
// only when the document has objects its validate checks, and the checks
// it declares offline run through it when an enabled scope uses it (the
// offline doctor). Doctor (GET
// /v1/doctor) runs the daemon's own checks (extensions, store, lock,
// telemetry) and every check a package declares, through check.run with
// the read-only view of how the configuration uses that package.
// Telemetry a package captures (permission telemetry.capture) is written
// to <state>/logs/telemetry.jsonl and handed to every package holding
// telemetry.sink through a bounded buffer per sink that drops with
// accounting, never waiting for a sink (telemetry.go).
//
// Faults, for tests and drills: with Options.TestFaults (serve
// --test-faults) every package runs behind a host/faultproxy proxy, one
// per package, whose rules POST /v1/faults arms (fault.go). A build with
// the faultinject tag has kill points before and after each durable step
// (KillPoints), one of which OPEN_CONDUIT_KILL_POINT arms at open
// (killpoint*.go); without the tag they compile to nothing.
//
// One daemon holds a state directory (an flock on <state>/lock naming its
// PID). Close shuts down in order: the API and the webhook listener
// (requests in flight finish), the engine's observation (runs go on),
// the telemetry sinks' buffers flushed, shutdown to every package at
// once, the running executions' leases
// released for the next daemon to adopt (executor.recover), the store.
//
//	d, err := daemon.Open(ctx, daemon.Options{ConfigDir: cfg, StateDir: state, BundledDir: bundled})
//	if err != nil { … }
//	go d.Run(ctx)        // until ctx ends
//	…
//	err = d.Close(context.Background())
package daemon
