// Package runner is an example Open Conduit executor written with the Go
// SDK exactly as a third party would write one: it imports protocol/...
// only and runs as its own process (cmd/runner, or the host's
// "open-conduit extension-run runner").
//
// Each run is a detached job: sh -c of the binding's command, started in
// a process group of its own with its output going to a file in the run's
// directory under the executor's state directory, and its standard input
// a named pipe the job itself holds open. The job's exit status is
// written to the run's directory by a small shell wrapper, so it is on
// disk even when no runner process saw the job end.
//
// A binding that grants the toolbelt gives each run its endpoint and
// token, which the job gets as OS_TOOLBELT_ENDPOINT and OS_TOOLBELT_TOKEN
// (executor label "cli"): a job calls the operations its binding grants
// with `open-conduit toolbelt call OPERATION INPUT`. The token is the
// attempt's at its lease epoch, so a job adopted by a later daemon (a new
// epoch) keeps the token it started with, which the host then refuses: a
// running process's environment cannot be renewed.
//
// Jobs outlive the runner process. What executor.recover needs (the
// job's process group, its start time and its directory) is persisted
// through the host's fenced execution.persist_recovery, and a restarted
// runner adopts a job from it: a job still running is watched again, a
// finished one reports the status it recorded, and anything else is
// not_adoptable.
//
// Controls: inject appends a line to the job's input pipe, interrupt
// sends SIGINT to the job's group, stop sends SIGTERM and then SIGKILL and
// answers only once no process of the group is left (physical-stop
// evidence), forget removes a settled run's directory, and live answers
// the tail of the job's output.
//
// That job model is the SDK's (protocol/sdk/jobs), shared with the shell
// executor; what is runner's own is its one output file, which takes both
// streams, and its lenient config.
package runner
