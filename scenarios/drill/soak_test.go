package drill

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extensions/notes"
)

// TestCountOps: the soak's operation check counts an acknowledged call
// whose note is missing as lost, and a note no request ID accounts for,
// or a request ID answered with two notes, as an effect made twice; a
// clean run counts neither.
func TestCountOps(t *testing.T) {
	works := []client.Work{{ID: "wk_a", State: "done"}, {ID: "wk_b", State: "done"}, {ID: "wk_c", State: "running"}}
	na, nb := notes.AddedNoteID("wk_a/0"), notes.AddedNoteID("wk_b/0")
	for _, c := range []struct {
		name              string
		acked             map[string][]string
		effects           []string
		count             int
		lost, twice, ackd int
		unexpected        bool
	}{
		{"clean", map[string][]string{"wk_a/0": {na}, "wk_b/0": {nb}}, []string{na, nb}, 2, 0, 0, 2, false},
		{"an unacknowledged effect is no loss", map[string][]string{"wk_a/0": {na}}, []string{na, nb}, 2, 0, 0, 1, false},
		{"lost", map[string][]string{"wk_a/0": {na}, "wk_b/0": {nb}}, []string{na}, 1, 1, 0, 2, true},
		{"a second note", map[string][]string{"wk_a/0": {na}}, []string{na, "n-0123456789abcdef"}, 2, 0, 1, 1, true},
		{"answered twice differently", map[string][]string{"wk_a/0": {na, nb}}, []string{na, nb}, 2, 0, 1, 1, true},
		{"a count that disagrees", map[string][]string{"wk_a/0": {na}}, []string{na}, 3, 0, 0, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rep SoakReport
			effects := map[string]bool{}
			for _, e := range c.effects {
				effects[e] = true
			}
			countOps(&rep, works, map[string]int{"wk_a": 2, "wk_b": 1}, c.acked, effects, c.count)
			assert.Equal(t, 3, rep.OpWorks)
			assert.Equal(t, 2, rep.OpSettled)
			assert.Equal(t, 1, rep.OpRetried)
			assert.Equal(t, c.ackd, rep.OpAcknowledged)
			assert.Equal(t, len(c.effects), rep.OpEffects)
			assert.Equal(t, c.lost, rep.OpLost, "lost")
			assert.Equal(t, c.twice, rep.OpTwice, "twice")
			assert.Equal(t, c.unexpected, len(rep.Unexpected) > 0, "unexpected: %v", rep.Unexpected)
		})
	}
}
