package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/runtime"
)

// FuzzClipLine: whatever an agent or extension writes, the clipped text is
// one line of valid UTF-8 without control characters, within the limit,
// and made only of runes of the input's first line.
func FuzzClipLine(f *testing.F) {
	for _, s := range []string{"", "checks on PR #9", "a\nb", "é\x00\xff\r\n", strings.Repeat("é", 200)} {
		f.Add(s, 200)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 4096 {
			return
		}
		got := runtime.ClipLine(s, max)
		if len(got) > max {
			t.Fatalf("ClipLine(%q, %d) = %q, %d bytes", s, max, got, len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("ClipLine(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("ClipLine(%q) = %q has a control character or line break", s, got)
			}
		}
		first := s
		if i := strings.IndexAny(s, "\r\n\u2028\u2029"); i >= 0 {
			first = s[:i]
		}
		for _, r := range got {
			if !strings.ContainsRune(first, r) {
				t.Fatalf("ClipLine(%q) = %q has a rune not in the first line", s, got)
			}
		}
	})
}

// FuzzValidateDisplay: a display from a handler's JSON is either refused
// with ErrInvalid or keeps every limit.
func FuzzValidateDisplay(f *testing.F) {
	for _, s := range []string{
		`{"title":"T","ref":"#1","links":[{"label":"Issue","url":"https://x.test/1"}]}`,
		`{"ref":"ENG-12","requester":"me"}`,
		`{"title":"a\nb"}`,
		`{"title":"t","links":[{"label":"l","url":"javascript:alert(1)"}]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d runtime.Display
		if json.Unmarshal(data, &d) != nil {
			return
		}
		if err := runtime.ValidateDisplay(d); err != nil {
			return
		}
		if d.Title == "" && d.Ref == "" {
			t.Fatal("accepted a display with neither title nor ref")
		}
		if len(d.Title) > runtime.MaxDisplayTitle || len(d.Ref) > runtime.MaxDisplayRef ||
			len(d.Requester) > runtime.MaxDisplayRequester || len(d.Links) > runtime.MaxDisplayLinks {
			t.Fatalf("accepted a display over a limit: %+v", d)
		}
		for _, l := range d.Links {
			if l.Label == "" || len(l.Label) > runtime.MaxDisplayLinkLabel || len(l.URL) > runtime.MaxDisplayURL {
				t.Fatalf("accepted a bad link: %+v", l)
			}
			if u := strings.ToLower(l.URL); !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				t.Fatalf("accepted a link that is not http or https: %q", l.URL)
			}
		}
		for _, s := range []string{d.Title, d.Ref, d.Requester} {
			if strings.ContainsAny(s, "\n\r") {
				t.Fatalf("accepted a field of several lines: %q", s)
			}
		}
	})
}
