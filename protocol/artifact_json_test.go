package protocol_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// ArtifactWriteParams.AppendJSON writes what json.Marshal does: the same
// bytes for an id encoding/json does not escape, the same value for any
// other, and base64 equal to encoding/base64's for every length around
// the fast loop's bounds.
func TestArtifactWriteParamsAppendJSON(t *testing.T) {
	var cases []protocol.ArtifactWriteParams
	for n := range 300 {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*31 + n)
		}
		cases = append(cases, protocol.ArtifactWriteParams{ArtifactID: "art_0123456789abcdef", Offset: int64(n) << 20, Data: data})
	}
	big := make([]byte, protocol.MaxChunkBytes)
	for i := range big {
		big[i] = byte(i * 7)
	}
	cases = append(cases,
		protocol.ArtifactWriteParams{ArtifactID: "art_1", Offset: 262144, Data: big},
		protocol.ArtifactWriteParams{ArtifactID: "art_1", Offset: 3},
		protocol.ArtifactWriteParams{ArtifactID: "", Offset: -1, Data: []byte{}},
		protocol.ArtifactWriteParams{ArtifactID: "a\"\\\n<>&\u2028é", Offset: 1 << 62, Data: []byte("hello")},
		protocol.ArtifactWriteParams{ArtifactID: "a\xffb\xed\xa0\x80", Offset: 7, Data: big[:100]},
	)
	for _, p := range cases {
		ours, err := p.AppendJSON([]byte("prefix"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(ours), "prefix"))
		ours = ours[len("prefix"):]
		theirs, err := json.Marshal(p)
		require.NoError(t, err)
		if utf8.ValidString(p.ArtifactID) && !strings.ContainsAny(p.ArtifactID, "\"\\\n<>&\u2028") {
			require.Equal(t, string(theirs), string(ours), "%d bytes", len(p.Data))
		}
		var got, want protocol.ArtifactWriteParams
		require.NoError(t, json.Unmarshal(ours, &got), "%s", ours)
		require.NoError(t, json.Unmarshal(theirs, &want))
		assert.Equal(t, want, got)
	}
}

// FuzzArtifactWriteParamsAppendJSON: for any params, AppendJSON's JSON is
// valid, holds the standard base64 of the data, and decodes to what
// json.Marshal's does. The seed corpus is under
// testdata/fuzz/FuzzArtifactWriteParamsAppendJSON.
func FuzzArtifactWriteParamsAppendJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string, off int64, data []byte) {
		p := protocol.ArtifactWriteParams{ArtifactID: id, Offset: off, Data: data}
		ours, err := p.AppendJSON(nil)
		require.NoError(t, err)
		require.True(t, json.Valid(ours), "%q", ours)
		require.Contains(t, string(ours), `"data":"`+base64.StdEncoding.EncodeToString(data)+`"`)
		theirs, err := json.Marshal(p)
		require.NoError(t, err)
		var got, want protocol.ArtifactWriteParams
		require.NoError(t, json.Unmarshal(ours, &got))
		require.NoError(t, json.Unmarshal(theirs, &want))
		require.Equal(t, want, got)
	})
}

// BenchmarkArtifactWriteParamsAppendJSON encodes one 64 KiB chunk's
// params as the SDK's writer does, and with json.Marshal for the ratio in
// the same run (-tags purego: without the AVX2 blocks).
func BenchmarkArtifactWriteParamsAppendJSON(b *testing.B) {
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := protocol.ArtifactWriteParams{ArtifactID: "art_0123456789abcdef", Offset: 1 << 20, Data: data}
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = p.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ArtifactWriteParams.DecodeJSON is held to encoding/json: the same
// document decodes to the same value with the same error, from a zero
// value and from one already holding values (encoding/json keeps what a
// document does not mention). Its fast path takes the small members as
// the transport hands them over, data null.
func TestArtifactWriteParamsDecodeAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		doc  string
		fast bool
	}{
		{`{"artifact_id":"art_0123456789abcdef","offset":1048576,"data":null}`, true},
		{` { "offset" : -0 , "artifact_id" : "é" , "data" : null } `, true},
		{`{"offset":999999999999999999}`, true},
		{`{"artifact_id":null,"offset":null,"data":null}`, true},
		{`{}`, true},
		{`null`, true},
		{`{"offset":-7}`, true},

		{`{"artifact_id":"a","offset":0,"data":"aGVsbG8="}`, false},
		{`{"data":"aGVs\nbG8="}`, false},
		{`{"offset":1000000000000000000}`, false},
		{`{"offset":9223372036854775808}`, false},
		{`{"offset":1.0}`, false},
		{`{"offset":1e3}`, false},
		{`{"offset":01}`, false},
		{`{"offset":-}`, false},
		{`{"offset":"1"}`, false},
		{`{"offset":1x}`, false},
		{`{"offset":1,"offset":2}`, false},
		{`{"Offset":1}`, false},
		{`{"artifact_id":"a\"b"}`, false},
		{"{\"artifact_id\":\"\xff\"}", false},
		{`{"artifact_id":1}`, false},
		{`{"data":5}`, false},
		{`{"data":nul}`, false},
		{`{"extra":1}`, false},
		{`{"offset":1}x`, false},
		{`[]`, false},
		{``, false},
	} {
		checkArtifactWriteDecode(t, []byte(c.doc))
		assert.Equal(t, c.fast, protocol.ArtifactWriteFastForTest([]byte(c.doc)), "fast path for %q", c.doc)
	}
}

func FuzzArtifactWriteParamsDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"artifact_id":"art_1","offset":65536,"data":null}`))
	f.Add([]byte(`{"offset":-12,"data":"aGVsbG8="}`))
	f.Fuzz(func(t *testing.T, doc []byte) { checkArtifactWriteDecode(t, doc) })
}

func checkArtifactWriteDecode(t *testing.T, doc []byte) {
	t.Helper()
	for _, start := range []protocol.ArtifactWriteParams{{}, {ArtifactID: "old", Offset: 5, Data: []byte("old")}} {
		want, got := start, start
		wantErr := json.Unmarshal(doc, &want)
		gotErr := got.DecodeJSON(doc)
		if wantErr == nil {
			assert.NoError(t, gotErr, "%q", doc)
		} else if assert.Error(t, gotErr, "%q", doc) {
			assert.Equal(t, wantErr.Error(), gotErr.Error(), "%q", doc)
		}
		assert.Equal(t, want, got, "%q", doc)
	}
}
