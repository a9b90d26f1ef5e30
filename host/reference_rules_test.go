package host_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// The reference (docs/protocol.md, rendered by package protocol, which
// cannot import the host) states these rules of the host; the tests here
// hold the host to them.

// TestServedMethodsAreTheWireTypedOnes: the host serves exactly the
// extension-to-host methods that have wire types, so the page's "not
// served by this host yet" on every other one is true.
func TestServedMethodsAreTheWireTypedOnes(t *testing.T) {
	var typed []string
	for _, m := range protocol.Methods() {
		if m.Direction == protocol.ExtensionToHost && protocol.HasWireTypes(m.Name) {
			typed = append(typed, m.Name)
		}
	}
	served := host.ServedMethods()
	slices.Sort(served)
	assert.Equal(t, typed, served)
}

// TestEnvironmentIsTheDocumentedOne: from a daemon environment holding
// far more, an extension gets the baseline, LC_*, and the grants that are
// not reserved; nothing else.
func TestEnvironmentIsTheDocumentedOne(t *testing.T) {
	daemon := []string{"SECRET_TOKEN=x", "LC_ALL=C", "OPEN_CONDUIT_STATE=/s", "OS_X=1", "GRANTED=yes", "AWS_SECRET_ACCESS_KEY=k"}
	var want []string
	for _, name := range protocol.BaselineEnv() {
		daemon = append(daemon, name+"=v")
		want = append(want, name+"=v")
	}
	got := host.Environment(daemon, []string{"GRANTED", "OPEN_CONDUIT_STATE", "OS_X"})
	want = append(want, "LC_ALL=C", "GRANTED=yes")
	assert.ElementsMatch(t, want, got)
}

// TestSourceBoundIsTheStores: the page's bound on a source name is the
// store's.
func TestSourceBoundIsTheStores(t *testing.T) {
	assert.Equal(t, runtime.MaxIdentifierBytes, protocol.MaxSourceBytes)
}
