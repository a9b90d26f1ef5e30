package host

import (
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// BaselineEnv are the variables every extension process gets from the
// daemon's environment when they are set (protocol.BaselineEnv, as the
// reference states it). LC_* is matched as a prefix.
var BaselineEnv = protocol.BaselineEnv()

// Environment builds an extension's environment from the daemon's: the
// baseline (BaselineEnv and LC_*), the variables the operator grants the
// package by name (passEnv) except the reserved ones
// (protocol.ReservedEnv, refused by NewProcess), and GORACE in a
// race-detector build, each only when set. Nothing else reaches the
// extension, so no credential or host setting leaks into it by accident.
func Environment(daemon []string, passEnv []string) []string {
	var out []string
	for _, kv := range daemon {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if slices.Contains(BaselineEnv, name) || strings.HasPrefix(name, protocol.BaselineEnvPrefix) ||
			(slices.Contains(passEnv, name) && !protocol.ReservedEnv(name)) || (raceBuild && name == "GORACE") {
			out = append(out, kv)
		}
	}
	return out
}
