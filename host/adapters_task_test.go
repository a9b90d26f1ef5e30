package host_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// A source's reconcile_interval is a duration of at least a second, on a
// reconcile source; anything else refuses the configure as invalid.
func TestRegistrationsCheckTheReconcileInterval(t *testing.T) {
	m := &protocol.Manifest{Name: "notes", Provides: protocol.Provides{Extensions: []protocol.ExtensionDecl{
		{Type: "notes", Ingress: true, Families: []protocol.FamilyDecl{{Name: "notes.note"}}}}}}
	src := func(interval string, reconcile bool) protocol.ConfigureResult {
		return protocol.ConfigureResult{Sources: []protocol.SourceDecl{{Name: "notes/inbox", Families: []string{"notes.note"},
			Reconcile: reconcile, ReconcileInterval: interval}}}
	}
	for _, ok := range []protocol.ConfigureResult{src("", true), src("", false), src("1s", true), src("1h30m", true)} {
		assert.NoError(t, host.CheckRegistrations(m, protocol.ConfigureParams{}, ok), "%+v", ok.Sources[0])
	}
	for _, bad := range []protocol.ConfigureResult{src("soon", true), src("999ms", true), src("-5m", true), src("5m", false),
		src(strings.Repeat("9", 300)+"h", true)} {
		err := host.CheckRegistrations(m, protocol.ConfigureParams{}, bad)
		assert.ErrorIs(t, err, protocol.ErrInvalid, "%+v", bad.Sources[0])
		if err != nil {
			assert.Less(t, len(err.Error()), 200, "the refusal does not echo a long value")
		}
	}
}
