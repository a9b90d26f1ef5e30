package sdk

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// CPUProfileEnv names a file prefix: when the variable is set in an
// extension's environment, Serve writes the process's CPU profile to
// <prefix>.<pid> from start to return. An extension is a separate process,
// so a benchmark of the daemon cannot profile it from its own; the daemon
// passes the variable only when the operator grants it (settings.pass_env).
const CPUProfileEnv = "EXTENSION_CPUPROFILE"

// startCPUProfile starts the CPU profile CPUProfileEnv asks for and
// returns what stops it; without the variable it does nothing. A profile
// that cannot start is reported on stderr and the extension serves on.
func startCPUProfile() (stop func()) {
	prefix := os.Getenv(CPUProfileEnv)
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sdk: %s: %v\n", CPUProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "sdk: %s: %v\n", CPUProfileEnv, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
