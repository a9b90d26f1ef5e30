package certify

import (
	"fmt"
	"io"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// WriteList writes each criterion with its ID, title, what it checks and
// the spec section it enforces (--list). With a manifest it also says
// whether the criterion applies to it, and why not.
func WriteList(w io.Writer, cs []Criterion, m *protocol.Manifest) {
	fmt.Fprintf(w, "criteria version %d: %s\n", CriteriaVersion, plural(len(cs), "criterion", "criteria"))
	for _, c := range cs {
		fmt.Fprintf(w, "\n%s  %s\n", c.ID, c.Title)
		fmt.Fprintf(w, "    checks:  %s\n", wrap(c.Checks, 64, "             "))
		fmt.Fprintf(w, "    section: %s\n", c.Section)
		if m != nil {
			if ok, reason := c.applies(m); ok {
				fmt.Fprintf(w, "    applies: yes\n")
			} else {
				fmt.Fprintf(w, "    applies: no, %s\n", reason)
			}
		}
	}
}

// wrap breaks text into lines of about width bytes, continuing each with
// prefix.
func wrap(text string, width int, prefix string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteString("\n")
				b.WriteString(prefix)
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
