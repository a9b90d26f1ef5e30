package jsonrpc_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/stretchr/testify/assert"
)

type chunk struct {
	Upload string `json:"upload"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
	Note   string `json:"note,omitempty"`
}

type named []byte

type odd struct {
	Raw   json.RawMessage `json:"raw"`
	Named named           `json:"named"`
	Data  []byte          `json:"data"`
	DATA  []byte          `json:"DATA"`
}

type embedded struct {
	chunk
	Extra string `json:"extra"`
}

// DecodeParams takes a direct path for big string members; whatever the
// input, it must agree with encoding/json.
func TestDecodeParamsAgreesWithEncodingJSON(t *testing.T) {
	blob := make([]byte, 48<<10)
	for i := range blob {
		blob[i] = byte(i * 31)
	}
	b64 := base64.StdEncoding.EncodeToString(blob)
	long := strings.Repeat("é plain text ", 1<<10)
	escaped := strings.Repeat(`line\n\"quoted\"\u00e9 `, 1<<10)
	cases := []struct {
		name   string
		params string
		into   func() any
	}{
		{"chunk", `{"upload":"u","offset":7,"data":"` + b64 + `"}`, func() any { return &chunk{} }},
		{"chunk with big note", `{"upload":"u","data":"` + b64 + `","note":"` + long + `"}`, func() any { return &chunk{} }},
		{"escaped big string", `{"note":"` + escaped + `"}`, func() any { return &chunk{Upload: "kept"} }},
		{"escaped base64", `{"data":"` + strings.Replace(b64, "/", `\/`, 3) + `"}`, func() any { return &chunk{} }},
		{"bad base64", `{"data":"` + b64[:len(b64)-3] + `!!!"}`, func() any { return &chunk{} }},
		{"key by case", `{"DATA":"` + b64 + `"}`, func() any { return &chunk{} }},
		{"duplicate key", `{"data":"` + b64 + `","data":"AAAA"}`, func() any { return &chunk{} }},
		{"duplicate key, big last", `{"data":"AAAA","data":"` + b64 + `"}`, func() any { return &chunk{} }},
		{"big string into a number", `{"offset":"` + b64 + `"}`, func() any { return &chunk{} }},
		{"unknown big member", `{"other":"` + b64 + `","offset":3}`, func() any { return &chunk{} }},
		{"raw, named and ambiguous fields", `{"raw":"` + b64 + `","named":"` + b64 + `","data":"` + b64 + `"}`, func() any { return &odd{} }},
		{"embedded", `{"data":"` + b64 + `","extra":"x"}`, func() any { return &embedded{} }},
		{"into a map", `{"data":"` + b64 + `"}`, func() any { return &map[string]any{} }},
		{"array", `["` + b64 + `"]`, func() any { return &[]string{} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, got := c.into(), c.into()
			wantErr := json.Unmarshal([]byte(c.params), want)
			gotErr := (&jsonrpc.Request{Method: "m", Params: json.RawMessage(c.params)}).DecodeParams(got)
			assert.Equal(t, wantErr == nil, gotErr == nil, "encoding/json: %v; DecodeParams: %v", wantErr, gotErr)
			if gotErr != nil {
				assert.ErrorIs(t, gotErr, jsonrpc.ErrInvalidParams)
			}
			assert.Equal(t, want, got)
		})
	}
}

// A big base64 member is decoded into the memory its []byte field already
// holds when that has room, chunk after chunk, and into new memory when
// the field is nil or too small; the bytes are the chunk's either way.
func TestDecodeParamsReusesTheFieldsMemory(t *testing.T) {
	params := func(fill byte, n int) []byte {
		b, err := json.Marshal(chunk{Upload: "u", Data: []byte(strings.Repeat(string(rune(fill)), n))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	buf := make([]byte, 0, 64<<10)
	var c chunk
	c.Data = buf
	assert.NoError(t, (&jsonrpc.Request{Params: params('a', 40000)}).DecodeParams(&c))
	assert.Equal(t, strings.Repeat("a", 40000), string(c.Data))
	assert.Same(t, &buf[:1][0], &c.Data[0], "decoded into the field's memory")

	c.Data = c.Data[:0]
	assert.NoError(t, (&jsonrpc.Request{Params: params('b', 50000)}).DecodeParams(&c))
	assert.Equal(t, strings.Repeat("b", 50000), string(c.Data))
	assert.Same(t, &buf[:1][0], &c.Data[0], "and again")

	small := make([]byte, 0, 100)
	c.Data = small
	assert.NoError(t, (&jsonrpc.Request{Params: params('c', 40000)}).DecodeParams(&c))
	assert.Equal(t, strings.Repeat("c", 40000), string(c.Data))
	assert.Equal(t, make([]byte, 100), small[:100], "a buffer too small is left alone")

	var fresh chunk
	assert.NoError(t, (&jsonrpc.Request{Params: params('d', 40000)}).DecodeParams(&fresh))
	assert.Equal(t, strings.Repeat("d", 40000), string(fresh.Data))
	assert.NotSame(t, &buf[:1][0], &fresh.Data[0])
}

// BenchmarkDecodeChunkParams decodes one 64 KiB chunk's params (87 KiB of
// base64) into a reused buffer, as the host's artifact.write does: into
// protocol.ArtifactWriteParams, whose own decoder reads the small members
// once the base64 is cut out, and into a struct of the same shape without
// one, which encoding/json reads them for, in the same run.
func BenchmarkDecodeChunkParams(b *testing.B) {
	type plainParams struct {
		ArtifactID string `json:"artifact_id"`
		Offset     int64  `json:"offset"`
		Data       []byte `json:"data"`
	}
	chunk := testChunk()
	params, err := json.Marshal(protocol.ArtifactWriteParams{ArtifactID: "art_0123456789abcdef0123456789abcdef", Offset: 1 << 20, Data: chunk})
	if err != nil {
		b.Fatal(err)
	}
	req := jsonrpc.Request{Method: "artifact.write", Params: params}
	buf := make([]byte, 0, len(chunk)+3)
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			p := plainParams{Data: buf}
			if err := req.DecodeParams(&p); err != nil || len(p.Data) != len(chunk) {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			p := protocol.ArtifactWriteParams{Data: buf}
			if err := req.DecodeParams(&p); err != nil || len(p.Data) != len(chunk) {
				b.Fatal(err)
			}
		}
	})
}
