package jsonrpc

import (
	"strings"
	"testing"
)

// The framing pass's cost on a 1 MiB line, which it validates as JSON and
// checks for the strict rule: base64 (ASCII, the artifact chunks) and text
// dense with characters beyond ASCII, whose UTF-8 is checked;
// "base64-loop" is base64 without skipString's long-string fast path, for
// the ratio in the same run.
func BenchmarkParseMessage(b *testing.B) {
	for _, c := range []struct {
		name, unit string
		loop       bool
	}{
		{"base64", "QUJDREVGR0g", false},
		{"base64-loop", "QUJDREVGR0g", true},
		{"text", "héllo wörld ✓ ", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.loop {
				longStringFastPath = false
				b.Cleanup(func() { longStringFastPath = true })
			}
			line := []byte(`{"jsonrpc":"2.0","id":7,"method":"artifact.write","params":{"id":"a1","offset":0,"data":"` +
				strings.Repeat(c.unit, 1<<20/len(c.unit)) + `"}}`)
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if m, err := parseMessage(line); err != nil || m.notStrict != "" {
					b.Fatal(err, m.notStrict)
				}
			}
		})
	}
}
