//go:build !faultinject

package daemon

import (
	"fmt"
	"net/http"

	"github.com/open-conduit/open-conduit/runtime"
)

// FaultInject says whether this build has the kill points (the faultinject
// build tag).
const FaultInject = false

// armKillPoint refuses a kill point in a build that has none.
func armKillPoint(environ []string) error {
	if v, ok := lookupEnv(environ, KillPointEnv); ok && v != "" {
		return fmt.Errorf("daemon: %s=%q is set, but this binary was built without the faultinject tag and has no kill points (go build -tags faultinject ./cmd/open-conduit)", KillPointEnv, v)
	}
	return nil
}

// killPoint compiles to nothing without the tag.
func killPoint(string) {}

// killPointFlushed compiles to nothing without the tag.
func killPointFlushed(http.ResponseWriter, string) {}

// killStore is the store itself without the tag.
func killStore(s runtime.Store) runtime.Store { return s }
