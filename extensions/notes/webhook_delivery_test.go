package notes

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// decodeDelivery is held to encoding/json: the same body decodes to the
// same Delivery with the same error, whichever path it takes.

var deliveryBodies = []struct {
	name string
	body string
	fast bool // the fast path takes it
}{
	{"one note", `{"notes":[{"id":"n1","rev":"1","title":"note 1"}]}`, true},
	{"every field", `{"notes":[{"id":"n1","rev":"2","title":"t","body":"b","tags":["x","y"],"link":"https://e.example/n1"}]}`, true},
	{"spaces", " {\n \"notes\" : [ { \"id\" : \"n1\" , \"rev\" : \"1\" } , { } ] } \r\n", true},
	{"empty", `{}`, true},
	{"null", `null`, true},
	{"null notes", `{"notes":null}`, true},
	{"no notes", `{"notes":[]}`, true},
	{"null note", `{"notes":[null]}`, true},
	{"null members", `{"notes":[{"id":null,"tags":null}]}`, true},
	{"empty and null tags", `{"notes":[{"tags":[]},{"tags":[null,"a"]}]}`, true},
	{"utf-8", `{"notes":[{"id":"n1","title":"é€😀"}]}`, true},

	{"escape", `{"notes":[{"id":"n\u0031"}]}`, false},
	{"folded key", `{"Notes":[]}`, false},
	{"unknown member", `{"notes":[{"id":"n1","extra":1}]}`, false},
	{"unknown top member", `{"notes":[],"x":[1,{}]}`, false},
	{"duplicate", `{"notes":[{"id":"a","id":"b"}]}`, false},
	{"duplicate notes", `{"notes":[],"notes":[{}]}`, false},
	{"invalid utf-8", "{\"notes\":[{\"id\":\"\xff\"}]}", false},
	{"wrong type", `{"notes":[{"id":1}]}`, false},
	{"wrong notes type", `{"notes":{}}`, false},
	{"wrong tags type", `{"notes":[{"tags":"a"}]}`, false},
	{"array", `[]`, false},
	{"truncated", `{"notes":[`, false},
	{"trailing", `{"notes":[]} x`, false},
	{"trailing comma", `{"notes":[{},]}`, false},
	{"nothing", ``, false},
}

func checkDeliveryDecode(t *testing.T, body []byte) {
	t.Helper()
	for _, start := range []Delivery{{}, {Notes: []Record{{ID: "old", Tags: []string{"t"}}}}} {
		want, got := start, start
		want.Notes, got.Notes = cloneRecords(start.Notes), cloneRecords(start.Notes)
		wantErr, gotErr := json.Unmarshal(body, &want), decodeDelivery(body, &got)
		assert.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), "error for %q", body)
		assert.Equal(t, want, got, "delivery for %q", body)
	}
}

func cloneRecords(rs []Record) []Record {
	if rs == nil {
		return nil
	}
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = r
		out[i].Tags = append([]string(nil), r.Tags...)
	}
	return out
}

func TestDecodeDeliveryAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range deliveryBodies {
		t.Run(c.name, func(t *testing.T) {
			checkDeliveryDecode(t, []byte(c.body))
			var d Delivery
			assert.Equal(t, c.fast, fastDelivery([]byte(c.body), &d), "fast path taken")
		})
	}
}

// The body is what a webhook sender writes: whatever its bytes, the
// decoder agrees with encoding/json.
func FuzzDecodeDelivery(f *testing.F) {
	for _, c := range deliveryBodies {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDeliveryDecode(t, body) })
}
