package agent

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestParseConfigRefusesBadScripts(t *testing.T) {
	cases := map[string]string{
		"not JSON":              `{"script":`,
		"no script":             `{}`,
		"unknown field":         `{"script":[],"extra":1}`,
		"unknown step field":    `{"script":[{"call":"a.b","wait":"1s"}]}`,
		"neither call nor fail": `{"script":[{}]}`,
		"both call and fail":    `{"script":[{"call":"a.b","fail":"x"}]}`,
		"fail with input":       `{"script":[{"fail":"x","input":{}}]}`,
		"both expectations":     `{"script":[{"call":"a.b","expect":{},"expect_error":"not_found"}]}`,
		"trailing data":         `{"script":[]} {}`,
		"think and call":        `{"script":[{"call":"a.b","think":"1s"}]}`,
		"think with input":      `{"script":[{"think":"1s","input":{}}]}`,
		"think no duration":     `{"script":[{"think":"soon"}]}`,
		"think zero":            `{"script":[{"think":"0s"}]}`,
		"think too long":        `{"script":[{"think":"11m"}]}`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(json.RawMessage(doc))
			require.Error(t, err)
			assert.ErrorIs(t, err, protocol.ErrInvalid)
		})
	}
	c, err := ParseConfig(json.RawMessage(`{"script":[{"call":"a.b","input":{"x":1},"expect":{"ok":true}},{"think":"10m"},{"fail":"stop"}]}`))
	require.NoError(t, err)
	assert.Len(t, c.Script, 3)
}

func TestHolds(t *testing.T) {
	decode := func(s string) any {
		var v any
		require.NoError(t, json.Unmarshal([]byte(s), &v))
		return v
	}
	cases := []struct {
		want, got string
		ok        bool
		path      string
	}{
		{`{"a":1}`, `{"a":1,"b":2}`, true, ""},
		{`{"a":{"b":"x"}}`, `{"a":{"b":"x","c":1}}`, true, ""},
		{`{"a":1}`, `{"a":2}`, false, "$.a"},
		{`{"a":1}`, `{}`, false, "$.a"},
		{`{"a":[1,2]}`, `{"a":[1,2,3]}`, false, "$.a"},
		{`{"a":[{"b":1}]}`, `{"a":[{"b":2}]}`, false, "$.a[0].b"},
		{`"x"`, `"x"`, true, ""},
		{`{}`, `[]`, false, "$"},
	}
	for _, c := range cases {
		path, ok := Holds(decode(c.want), decode(c.got), "$")
		assert.Equal(t, c.ok, ok, "%s in %s", c.want, c.got)
		assert.Equal(t, c.path, path, "%s in %s", c.want, c.got)
	}
}

func TestVerdict(t *testing.T) {
	refused := protocol.Errorf(protocol.CodeUnauthorized, "not granted")
	assert.Empty(t, verdict(Step{Call: "a.b"}, json.RawMessage(`{}`), nil))
	assert.Contains(t, verdict(Step{Call: "a.b"}, nil, refused), "refused with unauthorized")
	assert.Empty(t, verdict(Step{Call: "a.b", ExpectError: "unauthorized"}, nil, refused))
	assert.Contains(t, verdict(Step{Call: "a.b", ExpectError: "not_found"}, nil, refused), "expected the error not_found")
	assert.Contains(t, verdict(Step{Call: "a.b", ExpectError: "not_found"}, json.RawMessage(`{"x":1}`), nil), "the call answered")
	assert.Empty(t, verdict(Step{Call: "a.b", Expect: json.RawMessage(`{"x":1}`)}, json.RawMessage(`{"x":1,"y":2}`), nil))
	assert.Contains(t, verdict(Step{Call: "a.b", Expect: json.RawMessage(`{"x":2}`)}, json.RawMessage(`{"x":1}`), nil), "at $.x")
}

// FuzzParseConfig: any executor config is accepted as a well-formed
// script or refused as invalid; it never panics, and an accepted script
// holds the rules ParseConfig states.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{`{"script":[]}`, `{"script":[{"call":"a.b","input":{"x":1},"expect":{"y":[1]}}]}`,
		`{"script":[{"fail":"x"}]}`, `{"script":[{"call":"a.b","expect_error":"not_found","request_id":"r"}]}`, `{`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, protocol.ErrInvalid) {
				t.Fatalf("a refusal is coded invalid: %v", err)
			}
			return
		}
		if c.Script == nil || len(c.Script) > MaxSteps {
			t.Fatalf("accepted a script of %d steps (nil %v)", len(c.Script), c.Script == nil)
		}
		for i, s := range c.Script {
			if (s.Call == "") == (s.Fail == "") || (s.Expect != nil && s.ExpectError != "") {
				t.Fatalf("accepted step %d: %+v", i, s)
			}
		}
	})
}

func TestValidateWarnsOfAnEmptyScript(t *testing.T) {
	res, err := validate(t.Context(), protocol.ValidateParams{Kind: protocol.ValidateExecutor, Type: Name, Config: json.RawMessage(`{"script":[]}`)})
	require.NoError(t, err)
	assert.Equal(t, []string{WarnEmptyScript}, res.Warnings)
	res, err = validate(t.Context(), protocol.ValidateParams{Kind: protocol.ValidateExecutor, Type: Name, Config: json.RawMessage(`{"script":[{"fail":"x"}]}`)})
	require.NoError(t, err)
	assert.Empty(t, res.Warnings)
	_, err = validate(t.Context(), protocol.ValidateParams{Kind: protocol.ValidateExecutor, Type: Name, Config: json.RawMessage(`{}`)})
	assert.ErrorIs(t, err, protocol.ErrInvalid)
}
