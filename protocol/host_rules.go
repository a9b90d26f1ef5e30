package protocol

import "time"

// The rules below are what the host that serves this protocol promises an
// extension beyond the method tables: the reference (docs/protocol.md)
// states them, and the host takes its values from here, so the page and
// the host cannot disagree.

// BaselineEnv lists the variables every extension process gets from the
// daemon's environment, each only when the daemon has it set; LC_* is
// matched as a prefix. Nothing else reaches an extension but the variables
// the operator grants its package by name (pass_env, never one of
// ReservedEnvPrefixes).
func BaselineEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ", "TMPDIR", "TERM"}
}

// BaselineEnvPrefix is the prefix of the locale variables the baseline
// passes besides BaselineEnv.
const BaselineEnvPrefix = "LC_"

const (
	// HostShutdownGrace is how long the host waits for the answer to
	// shutdown, and then again, after it has closed the extension's
	// standard input, for the process to exit, before it sends SIGTERM.
	HostShutdownGrace = 5 * time.Second
	// HostTermGrace is how long the host waits after SIGTERM before it
	// sends SIGKILL to the extension's process group.
	HostTermGrace = 5 * time.Second
)

// MaxSourceBytes bounds the name of an ingress or emission source, as
// the host's store takes it (runtime.MaxIdentifierBytes). A source may
// nest: SourceNamespace takes the extension's name, "/" and any non-empty
// rest, slashes included.
const MaxSourceBytes = 512

// HasWireTypes reports whether this package defines the wire types of the
// method, its params and result: the methods this host serves (E→H) or
// sends (H→E). A catalogued method without them is one the host does not
// serve or send yet.
func HasWireTypes(method string) bool {
	_, ok := allShapes()[method]
	return ok
}
