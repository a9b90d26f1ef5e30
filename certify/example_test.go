package certify_test

import (
	"os"
	"time"

	"github.com/open-conduit/open-conduit/certify"
)

func ExampleWriteProgress() {
	certify.WriteProgress(os.Stdout, certify.Result{ID: "lifecycle/handshake", Status: certify.StatusPass, Duration: 12 * time.Millisecond})
	certify.WriteProgress(os.Stdout, certify.Result{ID: "executor/controls", Status: certify.StatusSkip, Detail: "the manifest declares no executor"})
	certify.WriteProgress(os.Stdout, certify.Result{ID: "kv/scoping", Status: certify.StatusFail, Duration: 30 * time.Millisecond,
		Detail: `kv.commit to namespace "other" was not refused`})
	// Output:
	// PASS lifecycle/handshake (12ms)
	// SKIP executor/controls: the manifest declares no executor
	// FAIL kv/scoping (30ms)
	//     kv.commit to namespace "other" was not refused
}
