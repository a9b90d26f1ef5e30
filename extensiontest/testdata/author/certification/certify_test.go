// Package certification certifies the greeter from go test: each
// certification criterion is a subtest.
package certification

import (
	"testing"

	et "github.com/open-conduit/open-conduit/extensiontest"
)

func TestCertify(t *testing.T) {
	et.Certify(t, "../cmd/greeter")
}
