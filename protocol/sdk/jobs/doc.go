// Package jobs is the job model of an SDK executor whose runs are detached
// processes: what extensions/runner and extensions/shell share, for any
// executor written the same way.
//
// Each run is a job: /bin/sh -c of the command the executor chooses from
// the binding's config, started in a process group of its own under the
// run's directory (runs/<digest of the run id> of the executor directory),
// its output in the files the executor names, its standard input a named
// pipe the job itself holds open, and its exit status written to the run's
// directory by a small shell wrapper, so it is on disk even when no
// executor process saw the job end.
//
// Jobs outlive the executor process. The run's Recovery (its process
// group, the leader's start time, its directory) is persisted through the
// host's fenced execution.persist_recovery and kept in the run's
// directory; a restarted executor adopts a job from it: one still running
// is watched again, one that recorded its exit status settles with it, and
// anything else, or metadata that is not what this executor wrote in its
// own run's directory, is not_adoptable.
//
// Controls: inject appends lines to the job's input pipe, interrupt sends
// SIGINT to the group, stop sends SIGTERM and then SIGKILL and answers only
// once no process of the group is left (the physical-stop evidence), forget
// removes a settled run's directory, and live answers the tail of each
// output file.
//
// An executor is one Spec (what differs: its name, its output files, how
// it reads its config, what its wait reports) given to New; the Executor
// it returns serves every method of sdk.Executor the model covers.
package jobs
