// Package shell is the shell executor: each run starts the binding's
// command with /bin/sh -c, in the run's own directory under the
// executor's state directory (<state>/executors/shell/runs/<digest of the
// run id>), detached in a process group of its own so it outlives the
// package process and the daemon. It is written with the Go SDK exactly as
// a third party would write it: it imports protocol/... only and runs as
// its own process (cmd/shell, or the host's "open-conduit extension-run
// shell").
//
// A run's directory holds its working files and the executor's: stdout
// and stderr (the command's two streams, kept apart), input (a named pipe,
// the command's standard input, which inject writes to), exit-status
// (written by a small shell wrapper when the command ends, so it is on
// disk even when no executor process saw the end) and recovery.json (the
// metadata executor.recover adopts the run from). When a run has ended,
// executor.wait writes stdout and stderr to the host as the run's
// artifacts ("stdout", "stderr", text/plain) before it answers.
//
// A binding that grants the toolbelt gives each run its endpoint and
// token, which the command gets as OS_TOOLBELT_ENDPOINT and
// OS_TOOLBELT_TOKEN (label "cli"): it calls the operations its binding
// grants with `open-conduit toolbelt call OPERATION INPUT`.
//
// Controls: inject writes lines to the command's input; interrupt sends
// SIGINT to its group; stop sends SIGTERM, then SIGKILL after StopGrace,
// and answers stopped only once no process of the group is left, saying
// how it knows (physical-stop evidence); forget removes a settled run's
// directory; live answers the tail of both streams. recover adopts a run
// from the metadata persisted through the host's fenced
// execution.persist_recovery, after a package or daemon restart, and
// refuses metadata whose directory is not the run's own under this
// executor's runs directory, or that differs from the record kept there.
//
// The binding's executor config is {"command": "..."}; without a command
// a run waits for one injected line and exits with the status it names.
//
// The job model is the SDK's (protocol/sdk/jobs), shared with the runner
// executor; what is shell's own is its two streams, its strict config and
// the artifacts its wait writes.
package shell
