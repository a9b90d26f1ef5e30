package notes

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeDelivery decodes a delivery body as json.Unmarshal would, with the
// same result and the same error. Webhook deliveries are parsed once each
// on the webhook path, where encoding/json's reflection (and the goroutine
// stack it grows) was a third of notes' CPU per delivery; the body a
// sender writes is almost always the plain shape ({"notes":[{"id":…,
// "rev":…,"title":…}]}: exact member names, each once, strings without
// escapes), which a single pass reads. Anything else goes to
// json.Unmarshal, so encoding/json alone decides what is refused.
func decodeDelivery(body []byte, d *Delivery) error {
	var fast Delivery
	if d.Notes == nil && fastDelivery(body, &fast) {
		*d = fast
		return nil
	}
	return json.Unmarshal(body, d)
}

// deliveryScan reads one JSON document; each method reports false for
// anything off the plain shape.
type deliveryScan struct {
	b []byte
	i int
}

func fastDelivery(body []byte, d *Delivery) bool {
	s := &deliveryScan{b: body}
	s.space()
	if s.literal("null") {
		s.space()
		return s.i == len(s.b)
	}
	seen := false
	ok := s.object(func(key string) bool {
		if key != "notes" || seen {
			return false
		}
		seen = true
		if s.literal("null") {
			return true
		}
		notes := []Record{}
		if !s.array(func() bool {
			var r Record
			if !s.record(&r) {
				return false
			}
			notes = append(notes, r)
			return true
		}) {
			return false
		}
		d.Notes = notes
		return true
	})
	s.space()
	return ok && s.i == len(s.b)
}

func (s *deliveryScan) record(r *Record) bool {
	if s.literal("null") {
		return true // encoding/json leaves the new Record as it is
	}
	var seen uint8
	return s.object(func(key string) bool {
		var field *string
		var bit uint8
		switch key {
		case "id":
			field, bit = &r.ID, 1
		case "rev":
			field, bit = &r.Rev, 2
		case "title":
			field, bit = &r.Title, 4
		case "body":
			field, bit = &r.Body, 8
		case "link":
			field, bit = &r.Link, 16
		case "tags":
			bit = 32
		default:
			return false
		}
		if seen&bit != 0 {
			return false // a member twice: encoding/json merges by order
		}
		seen |= bit
		if field != nil {
			return s.stringInto(field)
		}
		if s.literal("null") {
			return true // a new Record's Tags stay nil
		}
		tags := []string{}
		if !s.array(func() bool {
			var t string
			if !s.stringInto(&t) {
				return false
			}
			tags = append(tags, t)
			return true
		}) {
			return false
		}
		r.Tags = tags
		return true
	})
}

func (s *deliveryScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *deliveryScan) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// object reads an object, handing each member's plain key to member, which
// reads the value.
func (s *deliveryScan) object(member func(key string) bool) bool {
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(string(key)) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, handing each element to elem.
func (s *deliveryScan) array(elem func() bool) bool {
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// plainString reads a string without escapes or control characters whose
// bytes are valid UTF-8 (encoding/json would replace invalid bytes) and
// returns its contents, which alias s.b.
func (s *deliveryScan) plainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			s.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// stringInto reads a string member; null leaves the field as it is, as
// encoding/json does.
func (s *deliveryScan) stringInto(field *string) bool {
	if s.literal("null") {
		return true
	}
	v, ok := s.plainString()
	if ok {
		*field = string(v)
	}
	return ok
}
