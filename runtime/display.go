package runtime

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of what operators read about Work and Waits. Every display field
// is one line of UTF-8 without control characters.
const (
	MaxDisplayTitle     = 200
	MaxDisplayRef       = 40
	MaxDisplayRequester = 100
	MaxDisplayLinkLabel = 60
	MaxDisplayURL       = 2048
	MaxDisplayLinks     = 8
	// MaxWaitDescription caps a Wait's description, cut to its first line.
	MaxWaitDescription = 200
	// MaxWaitProgress caps a Wait's progress line.
	MaxWaitProgress = 120
)

// Display is what a Work is, in its source's words. It is stored on the
// Work as JSON.
type Display struct {
	Title     string        `json:"title,omitempty"`
	Ref       string        `json:"ref,omitempty"`
	Requester string        `json:"requester,omitempty"`
	Links     []DisplayLink `json:"links,omitempty"`
}

// DisplayLink is one labelled http or https link.
type DisplayLink struct {
	Label string `json:"label"`
	URL   string `json:"url"`
}

// ValidateDisplay checks d against the display limits. A display that
// breaks one is dropped whole by the router, never truncated; the error
// (wrapping ErrInvalid) is the reason it records.
func ValidateDisplay(d Display) error {
	if d.Title == "" && d.Ref == "" {
		return fmt.Errorf("%w: display needs a title or a ref", ErrInvalid)
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"title", d.Title, MaxDisplayTitle},
		{"ref", d.Ref, MaxDisplayRef},
		{"requester", d.Requester, MaxDisplayRequester},
	} {
		if err := checkLine("display "+f.name, f.value, f.max); err != nil {
			return err
		}
	}
	if len(d.Links) > MaxDisplayLinks {
		return fmt.Errorf("%w: display has %d links, over %d", ErrInvalid, len(d.Links), MaxDisplayLinks)
	}
	for i, l := range d.Links {
		if l.Label == "" {
			return fmt.Errorf("%w: display link %d has no label", ErrInvalid, i)
		}
		if err := checkLine(fmt.Sprintf("display link %d label", i), l.Label, MaxDisplayLinkLabel); err != nil {
			return err
		}
		if err := checkLine(fmt.Sprintf("display link %d url", i), l.URL, MaxDisplayURL); err != nil {
			return err
		}
		u, err := url.Parse(l.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: display link %d url is not an absolute http or https URL", ErrInvalid, i)
		}
	}
	return nil
}

// checkLine checks one line of text within max bytes.
func checkLine(field, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrInvalid, field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	if strings.ContainsAny(s, lineBreaks) {
		return fmt.Errorf("%w: %s is not one line", ErrInvalid, field)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s is not one line without control characters", ErrInvalid, field)
		}
	}
	return nil
}

// lineBreaks end a line: the control characters CR and LF and Unicode's
// line and paragraph separators, which are not control characters.
const lineBreaks = "\r\n\u2028\u2029"

// ClipLine fits text to one line within max bytes: it keeps the first
// line, drops other control characters and invalid UTF-8, trims spaces and
// cuts on a rune boundary. Wait descriptions and progress go through it,
// so an agent's text never fails a wait.
func ClipLine(s string, max int) string {
	if i := strings.IndexAny(s, lineBreaks); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "") {
		if unicode.IsControl(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}
