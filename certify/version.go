package certify

import (
	"runtime/debug"
	"sync"
)

// HostVersion is this binary's release as the host names it in
// initialize: the main module's version, or for a build from a checkout
// "(devel)" with the VCS revision it was built from.
var HostVersion = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "(devel) " + s.Value[:12]
		}
	}
	return "(devel)"
})
