package protocol_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestEmittedEventID(t *testing.T) {
	id := protocol.EmittedEventID("notes/inbox", "d-1")
	assert.Equal(t, id, protocol.EmittedEventID("notes/inbox", "d-1"), "not deterministic")
	assert.Regexp(t, regexp.MustCompile(`^evt_[0-9a-f]{64}$`), id)
	// Pinned: the id is part of the wire contract and must never change.
	assert.Equal(t, "evt_2eae9aca6e5e25afa4b6d895cac7767986d5546d303bd67dc56478e0a22d27cd", id)

	// The documented construction, written out, so an author in another
	// language can check their implementation against this value.
	preimage := []byte{0, 0, 0, 0, 0, 0, 0, 11}
	preimage = append(preimage, "notes/inbox"...)
	preimage = append(preimage, 0, 0, 0, 0, 0, 0, 0, 3)
	preimage = append(preimage, "d-1"...)
	sum := sha256.Sum256(preimage)
	assert.Equal(t, "evt_"+hex.EncodeToString(sum[:]), id)

	// Distinct identities give distinct ids, including those whose
	// concatenations agree.
	pairs := [][2]string{
		{"a", "bc"}, {"ab", "c"}, {"abc", ""}, {"", "abc"}, {"", ""},
		{"notes", "1"}, {"notes", "2"}, {"notes/x", "1"}, {"notes/x1", ""},
		{"a\x00", "b"}, {"a", "\x00b"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		got := protocol.EmittedEventID(p[0], p[1])
		if prev, dup := seen[got]; dup {
			t.Errorf("EmittedEventID(%q, %q) = EmittedEventID(%q, %q)", p[0], p[1], prev[0], prev[1])
		}
		seen[got] = p
	}
	assert.NotEqual(t, protocol.EmittedEventID("a", "bc"), protocol.EmittedEventID("ab", "c"))
}
