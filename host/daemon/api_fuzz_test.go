package daemon

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// FuzzParseTraceRequest: whatever the body, parsing never panics, refuses
// with invalid_request, and an accepted request has exactly one of an
// event and a sample and survives a round-trip.
func FuzzParseTraceRequest(f *testing.F) {
	for _, seed := range []string{
		`{"sample":"opened"}`,
		`{"event":{"source":"tester","family":"items","type":"opened","payload":{"item":"7"}}}`,
		`{"event":{"source":"a","source":"b"}}`,
		`{"sample":"a","event":{"source":"b"}}`,
		`{}`, ``, `[]`, `null`, `{"sample":"x"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseTraceRequest(body)
		if err != nil {
			if client.CodeOf(err) != client.CodeInvalidRequest {
				t.Fatalf("refusal %v is not invalid_request", err)
			}
			return
		}
		if (req.Event == nil) == (req.Sample == "") {
			t.Fatalf("accepted %q with event=%v sample=%q", body, req.Event != nil, req.Sample)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseTraceRequest(again); err != nil {
			t.Fatalf("an accepted request does not round-trip: %s: %v", again, err)
		}
	})
}

// FuzzAPIQuery: whatever the query string, the events route's parameter
// parsing never panics and keeps its bounds.
func FuzzAPIQuery(f *testing.F) {
	for _, seed := range []string{"scope=a&after=3&limit=10", "limit=0", "after=-1", "after=1&after=2", "x=1", "limit=99999999999999999999", "%zz"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if err := checkQuery(q, []string{"scope", "after", "limit"}); err != nil {
			return
		}
		after, err := queryInt(q, "after")
		if err == nil && after < 0 {
			t.Fatalf("after %d", after)
		}
		limit, err := queryLimit(q)
		if err == nil && (limit < 1 || limit > client.MaxPageLimit) {
			t.Fatalf("limit %d outside 1..%d", limit, client.MaxPageLimit)
		}
	})
}
