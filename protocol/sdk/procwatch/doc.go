// Package procwatch watches processes an executor started detached from
// itself (in their own process group, so they outlive the extension and
// the daemon), the way an extension that adopts them after a restart must:
// by pid and start time rather than as children it can wait on.
//
// Running tells a recorded process from a later one that reuses its pid
// (Identity is the start time to record); WaitExit waits for a process that
// is not a child without polling where the OS allows it (a pidfd on Linux);
// GroupAlive and WaitGroupGone give the physical-stop evidence a stop
// answers with: no process of the group is left, zombies counted as gone.
//
// It imports the standard library only, like the rest of the SDK.
package procwatch
