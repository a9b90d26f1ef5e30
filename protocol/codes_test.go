package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// specCodes is every code string, written out by hand from the spec's error
// table and its list of the protocol's own codes, so that renaming or
// dropping a code fails here rather than passing silently.
var specCodes = []struct {
	code protocol.Code
	text string
	wire int
}{
	// The spec's error table.
	{protocol.CodeInvalid, "invalid", -32000},
	{protocol.CodeUnsupported, "unsupported", -32000},
	{protocol.CodeUnauthorized, "unauthorized", -32000},
	{protocol.CodeUndeclared, "undeclared", -32000},
	{protocol.CodeNotFound, "not_found", -32000},
	{protocol.CodeConflict, "conflict", -32000},
	{protocol.CodeCausalLimit, "causal_limit", -32000},
	{protocol.CodeNotAdoptable, "not_adoptable", -32000},
	{protocol.CodeNotAccepting, "not_accepting", -32000},
	{protocol.CodeNothingToAttach, "nothing_to_attach", -32000},
	{protocol.CodeNotLive, "not_live", -32000},
	{protocol.CodeResourceSetupFailed, "resource_setup_failed", -32000},
	{protocol.CodeResourceNotFound, "resource_not_found", -32000},
	{protocol.CodeResourceExhausted, "resource_exhausted", -32000},
	{protocol.CodeSandboxDenied, "sandbox_denied", -32000},
	{protocol.CodeSandboxUnavailable, "sandbox_unavailable", -32000},
	{protocol.CodeContainerRunning, "container_running", -32000},
	{protocol.CodeContainerUnconfirmed, "container_unconfirmed", -32000},
	{protocol.CodeRetryAfter, "retry_after", -32000},
	// Named by the spec's schema evolution and KV layout rules.
	{protocol.CodeUnreadableSchema, "unreadable_schema", -32000},
	{protocol.CodeKVDowngrade, "kv_downgrade", -32000},
	// The protocol's own codes.
	{protocol.CodeUnsupportedProtocolVersion, "unsupported_protocol_version", -32000},
	{protocol.CodeReentrantCall, "reentrant_call", -32000},
	{protocol.CodeOverloaded, "overloaded", -32000},
	{protocol.CodeShuttingDown, "shutting_down", -32000},
	{protocol.CodeCancelled, "cancelled", -32800},
	{protocol.CodeInternal, "internal", -32603},
	// The JSON-RPC transport errors.
	{protocol.CodeParseError, "parse_error", -32700},
	{protocol.CodeMethodNotFound, "method_not_found", -32601},
	{protocol.CodeInvalidParams, "invalid_params", -32602},
}

var codeShape = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// wireError is a JSON-RPC error object as it crosses the wire.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// roundTrip sends e through the wire form: WireNumber and WireData encoded
// as a JSON-RPC error object, then decoded as a receiver would.
func roundTrip(t *testing.T, e *protocol.Error) *protocol.Error {
	t.Helper()
	msg, data := e.WireData()
	rawData, err := json.Marshal(data)
	require.NoError(t, err)
	line, err := json.Marshal(wireError{Code: e.WireNumber(), Message: msg, Data: rawData})
	require.NoError(t, err)
	var got wireError
	require.NoError(t, json.Unmarshal(line, &got))
	return protocol.DecodeWireError(got.Code, got.Message, got.Data)
}

func TestCodes(t *testing.T) {
	codes := protocol.Codes()
	require.NotEmpty(t, codes)

	t.Run("spec table", func(t *testing.T) {
		want := make([]protocol.Code, len(specCodes))
		for i, c := range specCodes {
			assert.Equal(t, c.text, string(c.code), "constant for %q renamed", c.text)
			assert.Equal(t, c.text, c.code.String())
			assert.Equal(t, c.wire, c.code.WireNumber(), "wire number of %s", c.text)
			want[i] = protocol.Code(c.text)
		}
		assert.ElementsMatch(t, want, codes, "Codes() differs from the spec's table")
	})

	t.Run("unique and well formed", func(t *testing.T) {
		seen := map[protocol.Code]bool{}
		for _, c := range codes {
			assert.False(t, seen[c], "duplicate code %s", c)
			seen[c] = true
			assert.Regexp(t, codeShape, string(c))
			text, err := c.MarshalText()
			require.NoError(t, err)
			assert.Equal(t, string(c), string(text))
		}
	})

	for _, c := range codes {
		t.Run(string(c), func(t *testing.T) {
			s := protocol.Sentinel(c)
			require.NotNil(t, s, "code %s has no sentinel", c)
			assert.Equal(t, c, s.Code)
			assert.Equal(t, c, protocol.CodeOf(s))
			assert.NotEmpty(t, s.Error())

			got := roundTrip(t, s)
			assert.Equal(t, c, got.Code)
			assert.ErrorIs(t, got, s, "errors.Is after a wire round trip")
			for _, other := range codes {
				if other != c {
					assert.False(t, errors.Is(got, protocol.Sentinel(other)), "%s matches %s", c, other)
				}
			}

			wrapped := fmt.Errorf("reading x: %w", s)
			assert.Equal(t, c, protocol.CodeOf(wrapped))
			assert.ErrorIs(t, wrapped, s)
			assert.ErrorIs(t, fmt.Errorf("outer: %w", wrapped), s)

			// An authored message crosses verbatim.
			authored := protocol.Errorf(c, "custom %s message", c)
			back := roundTrip(t, authored)
			assert.ErrorIs(t, back, s)
			if c.WireNumber() == protocol.WireAuthored {
				assert.Equal(t, authored.Message, back.Message)
			}
		})
	}
}

func TestReservedWireNumbers(t *testing.T) {
	reserved := map[int]protocol.Code{
		-32700: protocol.CodeParseError,
		-32601: protocol.CodeMethodNotFound,
		-32602: protocol.CodeInvalidParams,
		-32603: protocol.CodeInternal,
		-32800: protocol.CodeCancelled,
	}
	assert.Equal(t, -32700, protocol.WireParseError)
	assert.Equal(t, -32601, protocol.WireMethodNotFound)
	assert.Equal(t, -32602, protocol.WireInvalidParams)
	assert.Equal(t, -32603, protocol.WireInternal)
	assert.Equal(t, -32800, protocol.WireCancelled)
	assert.Equal(t, -32000, protocol.WireAuthored)

	// Number to code.
	for n, c := range reserved {
		assert.Equal(t, c, protocol.DecodeWireError(n, "m", nil).Code, "number %d", n)
		assert.Equal(t, n, c.WireNumber(), "code %s", c)
	}
	// Code to number: exactly the reserved codes use a reserved number.
	for _, c := range protocol.Codes() {
		n := c.WireNumber()
		if want, ok := reserved[n]; ok {
			assert.Equal(t, want, c, "number %d is taken by two codes", n)
		} else {
			assert.Equal(t, protocol.WireAuthored, n, "code %s uses an unknown number", c)
		}
	}
}

func TestDecodeWireErrorFallbacks(t *testing.T) {
	cases := []struct {
		name   string
		number int
		data   string
		want   protocol.Code
	}{
		{"authored without data", -32000, ``, protocol.CodeInternal},
		{"authored with empty code", -32000, `{"code":""}`, protocol.CodeInternal},
		{"authored with bad data", -32000, `[1]`, protocol.CodeInternal},
		{"unknown number", -31999, `{"code":"conflict"}`, protocol.CodeInternal},
		{"unknown authored code kept", -32000, `{"code":"gate_failed"}`, protocol.Code("gate_failed")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := protocol.DecodeWireError(tc.number, "msg", json.RawMessage(tc.data))
			assert.Equal(t, tc.want, got.Code)
			assert.Equal(t, "msg", got.Message)
		})
	}
	// An unknown code matches no sentinel.
	unknown := protocol.DecodeWireError(-32000, "m", json.RawMessage(`{"code":"gate_failed"}`))
	for _, c := range protocol.Codes() {
		assert.False(t, errors.Is(unknown, protocol.Sentinel(c)), "unknown code matches %s", c)
	}
}

func TestRetryAfterIsTheOnlyRetryHint(t *testing.T) {
	resetAt := time.Date(2026, 11, 30, 5, 0, 0, 0, time.FixedZone("x", 3600))

	hint := protocol.RetryAfter("slow down", resetAt)
	_, data := hint.WireData()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	assert.JSONEq(t, `{"code":"retry_after","reset_at":"2026-11-30T04:00:00Z"}`, string(raw))
	back := roundTrip(t, hint)
	assert.ErrorIs(t, back, protocol.ErrRetryAfter)
	assert.True(t, back.ResetAt.Equal(resetAt), "reset_at %v", back.ResetAt)

	noReset := roundTrip(t, protocol.RetryAfter("later", time.Time{}))
	assert.True(t, noReset.ResetAt.IsZero())

	for _, c := range protocol.Codes() {
		if c == protocol.CodeRetryAfter {
			continue
		}
		e := &protocol.Error{Code: c, Message: "m", ResetAt: resetAt}
		_, data := e.WireData()
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		var fields map[string]any
		require.NoError(t, json.Unmarshal(raw, &fields))
		assert.NotContains(t, fields, "reset_at", "code %s carries a retry hint", c)
		assert.True(t, roundTrip(t, e).ResetAt.IsZero(), "code %s kept reset_at", c)

		// A reset_at sent by a peer on another code is dropped too.
		forged := fmt.Sprintf(`{"code":%q,"reset_at":"2026-11-30T04:00:00Z"}`, c)
		assert.True(t, protocol.DecodeWireError(protocol.WireAuthored, "m", json.RawMessage(forged)).ResetAt.IsZero())
	}
}

func TestCodeOf(t *testing.T) {
	assert.Equal(t, protocol.CodeInternal, protocol.CodeOf(nil))
	assert.Equal(t, protocol.CodeInternal, protocol.CodeOf(io.EOF))
	assert.Equal(t, protocol.CodeInternal, protocol.CodeOf(errors.New("boom")))
	assert.Equal(t, protocol.CodeCancelled, protocol.CodeOf(context.Canceled))
	assert.Equal(t, protocol.CodeCancelled, protocol.CodeOf(fmt.Errorf("call: %w", context.Canceled)))
	assert.Equal(t, protocol.CodeConflict, protocol.CodeOf(fmt.Errorf("a: %w", fmt.Errorf("b: %w", protocol.ErrConflict))))
	// The first *Error in the chain wins.
	joined := errors.Join(errors.New("plain"), protocol.ErrNotFound)
	assert.Equal(t, protocol.CodeNotFound, protocol.CodeOf(joined))
}

func TestErrorText(t *testing.T) {
	assert.Equal(t, "conflict", protocol.NewError(protocol.CodeConflict, "").Error())
	assert.Equal(t, "conflict", protocol.NewError(protocol.CodeConflict, "conflict").Error())
	assert.Equal(t, "key k changed", protocol.Errorf(protocol.CodeConflict, "key %s changed", "k").Error())
	assert.Nil(t, protocol.Sentinel("no_such_code"))
	// Matching against the nil sentinel of an unknown code is false, not a panic.
	assert.False(t, errors.Is(protocol.ErrConflict, protocol.Sentinel("no_such_code")))
}

// TestCodesDeclaredMatchTable reads codes.go itself, so a Code constant or
// an Err sentinel declared outside the table cannot go unnoticed.
func TestCodesDeclaredMatchTable(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	require.NoError(t, err)
	constValue := map[string]protocol.Code{}
	var sentinelCodes []protocol.Code
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				switch {
				case gd.Tok == token.CONST && strings.HasPrefix(name.Name, "Code"):
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s is not a literal", name.Name)
					text, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					constValue[name.Name] = protocol.Code(text)
				case gd.Tok == token.VAR && strings.HasPrefix(name.Name, "Err"):
					call, ok := vs.Values[i].(*ast.CallExpr)
					require.True(t, ok, "%s is not built with NewError", name.Name)
					arg, ok := call.Args[0].(*ast.Ident)
					require.True(t, ok, "%s: the code is not a constant", name.Name)
					sentinelCodes = append(sentinelCodes, constValue[arg.Name])
				}
			}
		}
	}
	declared := make([]protocol.Code, 0, len(constValue))
	for _, c := range constValue {
		declared = append(declared, c)
	}
	assert.ElementsMatch(t, protocol.Codes(), declared, "Code constants and Codes() differ")
	assert.ElementsMatch(t, protocol.Codes(), sentinelCodes, "Err sentinels and Codes() differ")
}
