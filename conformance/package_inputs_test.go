package conformance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

const inputsManifest = `{"name":"memo","version":"1.0.0","command":["memo"],"protocol":[1],
 "provides":{"extensions":[{"type":"memo","ingress":true,"families":[{"name":"memo.note","rederivable":true}]}],
  "routes":[{"handler":"memo"}],
  "operations":[{"name":"memo.add","kind":"handler","summary":"add"}],
  "schemas":[{"base":"memo.note","versions":[1,2]}]}}`

func inputsManifestValue(t *testing.T) *protocol.Manifest {
	m, err := protocol.ParseManifest([]byte(inputsManifest))
	require.NoError(t, err)
	return m
}

func TestParseInputsKeepsWhatTheAuthorWrote(t *testing.T) {
	in, err := conformance.ParseInputs([]byte(`{
	  "operations": {"memo.add": [{"title": "b", "a": 1}, "x"]},
	  "routes": {"memo": [{"family": "memo.note", "schema": "memo.note.v2", "payload": {"id": "1"}}]},
	  "ingress": {"memo": [{"path": "/memo/hook", "headers": {"X-Event": ["push"]}, "body": {"n": 1}}]}
	}`), inputsManifestValue(t))
	require.NoError(t, err)
	require.Len(t, in.Operations["memo.add"], 2)
	assert.Equal(t, `{"title":"b","a":1}`, string(in.Operations["memo.add"][0]), "member order as written")
	assert.Equal(t, `"x"`, string(in.Operations["memo.add"][1]))
	assert.Equal(t, []conformance.InputEvent{{Family: "memo.note", Schema: "memo.note.v2", Payload: json.RawMessage(`{"id":"1"}`)}}, in.Routes["memo"])
	assert.Equal(t, []conformance.InputDelivery{{Path: "/memo/hook", Headers: map[string][]string{"X-Event": {"push"}}, Body: json.RawMessage(`{"n":1}`)}}, in.Ingress["memo"])

	empty, err := conformance.ParseInputs([]byte(`{}`), inputsManifestValue(t))
	require.NoError(t, err)
	assert.Empty(t, empty.Operations)
}

// Every refusal names where: a JSON path, or a byte offset for bad syntax.
func TestParseInputsRefusesABadFileWithItsPath(t *testing.T) {
	for _, tc := range []struct{ doc, path, message string }{
		{`{"operations": {"memo.add": [1]}} x`, "byte 34", "data after the top-level value"},
		{`{"operations": {"memo.add": [1}`, "byte", "invalid JSON"},
		{`[]`, "$", "want an object, not an array"},
		{`{"operation": {}}`, "$.operation", "unknown field"},
		{`{"operations": {"memo.add": [1]}, "operations": {}}`, "$.operations", "duplicate member"},
		{`{"operations": {"memo.add": [{"a": 1, "a": 2}]}}`, `$.operations["memo.add"][0].a`, "duplicate member"},
		{`{"operations": {"memo.add": []}}`, `$.operations["memo.add"]`, "one or more entries"},
		{`{"operations": {"memo.add": {}}}`, `$.operations["memo.add"]`, "want an array"},
		{`{"operations": {"memo.gone": [1]}}`, `$.operations["memo.gone"]`, "not an operation the manifest declares"},
		{`{"operations": {"memo.add": [1e400]}}`, `$.operations["memo.add"][0]`, "does not fit a float64"},
		{`{"routes": {"other": [{"family": "memo.note", "payload": 1}]}}`, `$.routes.other`, "not a route handler"},
		{`{"routes": {"memo": [{"family": "memo.note"}]}}`, `$.routes.memo[0]`, `missing field "payload"`},
		{`{"routes": {"memo": [{"family": "memo.other", "payload": 1}]}}`, `$.routes.memo[0].family`, "not a family"},
		{`{"routes": {"memo": [{"family": "memo.note", "schema": "memo.note.v1", "payload": 1}]}}`, `$.routes.memo[0].schema`, "memo.note.v1"},
		{`{"routes": {"memo": [{"family": "memo.note", "payload": 1, "extra": 1}]}}`, `$.routes.memo[0].extra`, "unknown field"},
		{`{"ingress": {"memo": [{"headers": {"A": "b"}, "body": 1}]}}`, `$.ingress.memo[0].headers.A`, "want an array of strings"},
		{`{"ingress": {"nope": [{"body": 1}]}}`, `$.ingress.nope`, "not an extension type with ingress"},
		{"{\"operations\": {\"memo.add\": [\"\xff\"]}}", "byte 30", "invalid UTF-8"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			_, err := conformance.ParseInputs([]byte(tc.doc), inputsManifestValue(t))
			var ie *conformance.InputsError
			require.ErrorAs(t, err, &ie)
			assert.Contains(t, ie.Path, tc.path)
			assert.Contains(t, ie.Message, tc.message)
			assert.Contains(t, err.Error(), conformance.InputsFile+": at "+ie.Path)
		})
	}
}

func TestLoadInputs(t *testing.T) {
	m := inputsManifestValue(t)
	dir := t.TempDir()
	in, err := conformance.LoadInputs(dir, m)
	require.NoError(t, err)
	assert.Nil(t, in, "a package without the file has none")

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "certify"), 0o755))
	file := filepath.Join(dir, filepath.FromSlash(conformance.InputsFile))
	require.NoError(t, os.WriteFile(file, []byte(`{"operations": {"memo.add": [{}]}}`), 0o644))
	in, err = conformance.LoadInputs(dir, m)
	require.NoError(t, err)
	assert.Len(t, in.Operations["memo.add"], 1)

	require.NoError(t, os.WriteFile(file, make([]byte, conformance.MaxInputsBytes+1), 0o644))
	_, err = conformance.LoadInputs(dir, m)
	assert.ErrorContains(t, err, "larger than")
}

// SchemaInput honours what a schema says of a value, so a package's own
// validation accepts what certification builds.
func TestSchemaInputKeepsTheSchema(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string
	}{
		{`null`, `{}`},
		{`{"type":"object"}`, `{}`},
		{`{"type":"object","properties":{"t":{"type":"string"}},"required":["t"]}`, `{"t":"certify t"}`},
		{`{"properties":{"n":{"type":"integer","minimum":5,"maximum":9}},"required":["n"]}`, `{"n":5}`},
		{`{"properties":{"n":{"type":"number","maximum":0.5}},"required":["n"]}`, `{"n":0.5}`},
		{`{"properties":{"n":{"type":"integer","exclusiveMinimum":10}},"required":["n"]}`, `{"n":11}`},
		{`{"properties":{"n":{"type":"integer","minimum":3,"multipleOf":4}},"required":["n"]}`, `{"n":4}`},
		{`{"properties":{"c":{"enum":["red","green"]}},"required":["c"]}`, `{"c":"red"}`},
		{`{"properties":{"c":{"type":"string","default":"blue"}},"required":["c"]}`, `{"c":"blue"}`},
		{`{"properties":{"c":{"const":7}},"required":["c"]}`, `{"c":7}`},
		{`{"properties":{"at":{"type":"string","format":"date-time"}},"required":["at"]}`, `{"at":"2024-03-01T12:00:00Z"}`},
		{`{"properties":{"u":{"type":"string","format":"uri"}},"required":["u"]}`, `{"u":"https://example.com/certify"}`},
		{`{"properties":{"s":{"type":"string","maxLength":3}},"required":["s"]}`, `{"s":"cer"}`},
		{`{"properties":{"s":{"type":"string","minLength":20}},"required":["s"]}`, `{"s":"certify sxxxxxxxxxxx"}`},
		{`{"properties":{"a":{"type":"array","minItems":2,"items":{"type":"boolean"}}},"required":["a"]}`, `{"a":[true,true]}`},
		{`{"properties":{"o":{"type":"object","properties":{"x":{"type":["null","integer"]}},"required":["x"]}},"required":["o"]}`, `{"o":{"x":1}}`},
		{`{"properties":{"v":{"oneOf":[{"type":"integer","minimum":2},{"type":"string"}]}},"required":["v"]}`, `{"v":2}`},
		{`{"allOf":[{"properties":{"a":{"type":"boolean"}},"required":["a"]},{"properties":{"b":{"const":"x"}},"required":["b"]}]}`, `{"a":true,"b":"x"}`},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			var schema any
			require.NoError(t, json.Unmarshal([]byte(tc.schema), &schema))
			assert.JSONEq(t, tc.want, string(conformance.SchemaInput(schema)))
		})
	}
}

func TestSchemaInputMatchesPatterns(t *testing.T) {
	for _, pattern := range []string{`^[A-Z]+-[0-9]+$`, `^(ab|cd){2,3}x?$`, `^\d{4}-\d{2}$`, `[a-z]+@example\.org`, `^v[0-9]+(\.[0-9]+){2}$`, `^[^a-z]{3}$`, `^\w+\s\S$`} {
		t.Run(pattern, func(t *testing.T) {
			raw := conformance.SchemaInput(map[string]any{"properties": map[string]any{"s": map[string]any{"type": "string", "pattern": pattern}}, "required": []any{"s"}})
			var got struct{ S string }
			require.NoError(t, json.Unmarshal(raw, &got))
			assert.Regexp(t, regexp.MustCompile(pattern), got.S)
		})
	}
}

// FuzzParseInputs: any file is parsed or refused with a path, never a
// panic, and what parses names only what the manifest declares.
func FuzzParseInputs(f *testing.F) {
	for _, seed := range []string{`{}`, `{"operations":{"memo.add":[{"title":"x"}]}}`,
		`{"routes":{"memo":[{"family":"memo.note","payload":{}}]}}`, `{"ingress":{"memo":[{"body":null}]}}`, `[`, `{"a":1,"a":2}`} {
		f.Add([]byte(seed))
	}
	m, err := protocol.ParseManifest([]byte(inputsManifest))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := conformance.ParseInputs(data, m)
		if err != nil {
			var ie *conformance.InputsError
			if !assert.ErrorAs(t, err, &ie) || ie.Path == "" {
				t.Fatalf("a refusal without a path: %v", err)
			}
			return
		}
		for name, inputs := range in.Operations {
			assert.Equal(t, "memo.add", name)
			for _, raw := range inputs {
				assert.True(t, json.Valid(raw), "%s", raw)
			}
		}
	})
}

// The author's reference documents the inputs file by the names and the
// bound this package enforces.
func TestInputsFileIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "protocol.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), "## Certification inputs")
	assert.Contains(t, string(doc), "`"+conformance.InputsFile+"`")
	assert.Equal(t, 1<<20, conformance.MaxInputsBytes, "the page says 1 MiB")
	for _, field := range []string{"`operations`", "`routes`", "`ingress`", "`family`", "`payload`", "`headers`", "`body`"} {
		assert.Contains(t, string(doc), field)
	}
}

// withInputs is a scripted package whose author gave inputs.
type withInputs struct {
	*scripted
	in *conformance.Inputs
}

func (w withInputs) Inputs() *conformance.Inputs { return w.in }

// The checks call the package with the author's inputs: an operation's
// input replaces the built one, a route's Events are offered besides the
// built ones, and an ingress type's deliveries replace the built one.
func TestChecksUseTheAuthorsInputs(t *testing.T) {
	ctx := context.Background()
	m := inputsManifestValue(t)
	in, err := conformance.ParseInputs([]byte(`{
	  "operations": {"memo.add": [{"title": "from the author"}]},
	  "routes": {"memo": [{"family": "memo.note", "schema": "memo.note.v2", "payload": {"id": "author-1"}}]},
	  "ingress": {"memo": [{"path": "/memo/hook", "body": {"id": "author-delivery"}}]}
	}`), m)
	require.NoError(t, err)
	s := &scripted{manifest: m, serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
		switch method {
		case "configure":
			return protocol.ConfigureResult{Sources: []protocol.SourceDecl{{Name: "memo", ScopeID: "s1"}}}, nil
		case "ingress.push":
			return protocol.IngressPushResult{Events: []protocol.EventDraft{{Source: "memo", DeliveryID: "d1", Family: "memo.note"}}}, nil
		}
		return good(method, params, out)
	}}
	d := withInputs{s, in}
	require.NoError(t, conformance.CheckPackageOperationsIdempotent(ctx, d))
	require.NoError(t, conformance.CheckPackageRoutesPure(ctx, d))
	require.NoError(t, s.Call(ctx, "configure", d.ConfigureParams(), nil))
	require.NoError(t, conformance.CheckPackageEmissionsIdempotent(ctx, d))

	var sawInput, sawEvent, sawDelivery, sawBuilt bool
	for _, l := range d.Wire() {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if l.FromExtension || json.Unmarshal(l.Line, &msg) != nil {
			continue
		}
		switch msg.Method {
		case "operation.call":
			var p protocol.OperationCallParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			assert.JSONEq(t, `{"title":"from the author"}`, string(p.Input), "the author's input replaces the built one")
			sawInput = true
		case "route.match":
			var p protocol.RouteMatchParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			if p.Event.Schema == "memo.note.v2" {
				assert.JSONEq(t, `{"id":"author-1"}`, string(p.Event.Payload))
				assert.False(t, p.Event.AcceptedAt.IsZero())
				sawEvent = true
			} else {
				sawBuilt = true
			}
		case "ingress.push":
			var p protocol.IngressPushParams
			require.NoError(t, json.Unmarshal(msg.Params, &p))
			assert.JSONEq(t, `{"id":"author-delivery"}`, string(p.Delivery.Body))
			assert.Equal(t, "/memo/hook", p.Delivery.Path)
			sawDelivery = true
		}
	}
	assert.True(t, sawInput, "operation.call with the author's input")
	assert.True(t, sawEvent, "route.match of the author's Event")
	assert.True(t, sawBuilt, "route.match of the built Event too")
	assert.True(t, sawDelivery, "ingress.push of the author's delivery")
}
