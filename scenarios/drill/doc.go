// Package drill owns Open Conduit's fault drills: the testscript commands
// that drive the real binary through a crash (start and kill the daemon,
// kill a package, hold a webhook mid-request, wait on the change stream,
// check what was kept), the runner that replays an embedded drill outside
// go test (open-conduit drill run), and the kill -9 soak (Soak, open-conduit
// drill soak). The drills themselves are scenarios/testdata/drills/*.txtar,
// embedded in package scenarios; go test ./scenarios -run TestDrills/NAME
// runs one through the same Params.
//
// Each drill's comment names the crash-table row (or spec section) it
// drills on a "# row:" line. Every drill runs in its own work directory
// with $WORK/config and $WORK/state as the daemon's directories, the
// binary first on PATH and named by $OPEN_CONDUIT (a job's command calls
// it by that path), $NOTES_WEBHOOK_SECRET set and $NOTES_TEST_HOLD_FIFO
// naming a FIFO for notes' test hold. The condition [faultinject] holds
// when the binary was built with -tags faultinject.
//
// The commands, besides testscript's own (each checks its arguments and
// says what it expected when it fails; none takes "!" unless it says so):
//
//	await event|work|exec|package [--within D] [count=N] [FIELD=VALUE...]
//		wait on the change stream, from its start, until N distinct
//		Events (Works, Executions, packages) had a change matching every
//		field (event fields: source, delivery, family, type, scope,
//		schema; work fields, as a change carries them: id, state, scope;
//		exec fields: work, state, attempt, epoch, executor; package
//		fields: name, state, restarts); a deadline, never a sleep
//	await log [--within D] [count=N] REGEXP
//		wait until the running daemon's log, since its start, holds N
//		matches (default 1), woken by each write to it
//	clock advance DURATION
//		move the daemon's manual clock (serve --test-clock)
//	config apply FILE
//		apply FILE ($NAME expanded) to the running daemon; with ! the
//		daemon must refuse it (the diagnostics are printed)
//	doctor [--want ok|fail]
//		run the daemon's doctor, print each check (status, name, code,
//		detail); the report must be ok (default) or fail
//	daemon start [NAME=VALUE...] [serve flags...]
//		start serve (with $WORK/config.json, $NAME expanded, as its
//		config.json) and wait for its ready line; NAME=VALUE words go
//		into its environment (OPEN_CONDUIT_KILL_POINT=NAME:N)
//	daemon stop
//		SIGTERM; the daemon must exit 0
//	daemon kill
//		SIGKILL, after recording its package processes for expect none
//	daemon exited
//		wait for the daemon to die of its own SIGKILL (a kill point of a
//		faultinject build), recording its packages for expect none
//	daemon dies [NAME=VALUE...] [serve flags...]
//		start serve as daemon start does and wait, ready or not, for it
//		to die of its own SIGKILL (a kill point it passes while it
//		starts, such as a KV migration's); records no packages
//	daemon restart [NAME=VALUE...] [serve flags...]
//		stop a running daemon, then start (the last start's arguments
//		when none are given)
//	expect event|work|exec|pass N [FIELD=VALUE...]
//		exactly N Events (fields as for await, and route: pending,
//		created, attached or unmatched), Works (fields: id, state, kind,
//		scope, binding), Executions (fields: work, state, attempt,
//		epoch, executor) or background passes (fields: kind, name,
//		package, runs, failures) match, read through the API now
//	expect wait N [scope=ID]
//		exactly N active Waits
//	expect kv PKG N [namespace=NS] [prefix=P]
//		exactly N entries in PKG's KV namespace (client.KV)
//	expect fired PKG N
//		PKG's armed fault rules have fired N times in all (a drill
//		proves its fault happened)
//	expect none
//		every package process of the last killed daemon has exited (no
//		orphan); waits on each process's pidfd up to the deadline
//	ext kill NAME
//		SIGKILL to package NAME's process group (its PID in status);
//		returns once the process has exited and the change stream shows
//		the daemon saw the crash
//	fault PKG RULE...
//		arm a fault on the proxy between the daemon and PKG (serve
//		--test-faults), in host/faultproxy's grammar: crash
//		method=route.match nth=1, delay method=operation.call for=2s …
//	fault clear PKG
//		disarm PKG's faults
//	group kill FILE
//		SIGKILL to the process group whose id FILE holds (a job writes
//		its own); returns once every process of the group has exited
//	inbox held
//		wait until notes' inbox test hold stops a pass just before the
//		ingress.deliver of the delivery daemon start
//		NOTES_TEST_INBOX_HOLD=ID names (granted through pass_env)
//	inbox release [--want accepted|refused]
//		let the held delivery go; notes says how the host answered it
//		(accepted added=N, refused CODE), default want accepted
//	install NAME...
//		install bundled packages (notes, runner) under $WORK/config
//	reconcile [--want complete|partial|refused] SOURCE
//		run one reconcile scan of SOURCE now
//	samples SCOPE
//		print the sample Events the scope's routes offer, one a line
//	webhook send [--hold NAME] [--want STATUS] SCOPE ENTRY FILE
//		post FILE to notes' webhook of SCOPE/ENTRY, signed as notes
//		verifies it; STATUS is a code, 2xx, 4xx, 5xx, lost (no answer),
//		fail (not 2xx, lost included) or any, default 2xx; --hold makes
//		notes hold the verified request and returns once it does
//	webhook answer [--want STATUS] NAME
//		check how the held request NAME ended
package drill
