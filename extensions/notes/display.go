package notes

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/protocol"
)

// The limits of a Work display, in bytes.
const (
	maxTitleBytes     = 200
	maxRefBytes       = 40
	maxLinkLabelBytes = 60
	maxURLBytes       = 2048
)

// clip keeps the first line of s without control characters, cut at a
// character boundary to at most limit bytes.
func clip(s string, limit int) string {
	line, _, _ := strings.Cut(s, "\n")
	line = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, line)
	line = strings.TrimSpace(line)
	for len(line) > limit {
		_, size := utf8.DecodeLastRuneInString(line)
		line = line[:len(line)-size]
	}
	return line
}

// displayURL returns raw when it is an absolute http or https URL with a
// host, no credentials and within the limit; otherwise "".
func displayURL(raw string) string {
	if raw == "" || len(raw) > maxURLBytes || strings.ContainsFunc(raw, unicode.IsControl) {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return ""
	}
	return raw
}

// display is what a Work made from n shows: its title, its ID as the ref
// and its link when it has a usable one. It answers nil when the note
// says nothing a display can carry.
func display(n Note) *protocol.Display {
	d := &protocol.Display{Title: clip(n.Title, maxTitleBytes), Ref: clip(n.ID, maxRefBytes)}
	if u := displayURL(n.Link); u != "" {
		d.Links = []protocol.DisplayLink{{Label: clip("Note "+n.ID, maxLinkLabelBytes), URL: u}}
	}
	if d.Title == "" && d.Ref == "" {
		return nil
	}
	return d
}
