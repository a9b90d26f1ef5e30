package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/conformance"
	"github.com/open-conduit/open-conduit/protocol"
)

// scripted is a PackageDriver whose package is a Go function: each call is
// recorded on the wire as the host's request, the lines the function
// writes, and its answer. It drives the wire-reading checks without a
// process.
type scripted struct {
	manifest *protocol.Manifest
	serve    func(method string, params json.RawMessage, out *[]string) (any, error)

	mu   sync.Mutex
	wire conformance.WireLog
	id   int
}

func (s *scripted) Manifest() *protocol.Manifest { return s.manifest }
func (s *scripted) InitializeParams() protocol.InitializeParams {
	return protocol.InitializeParams{ProtocolVersions: protocol.SupportedVersions()}
}
func (s *scripted) ConfigureParams() protocol.ConfigureParams {
	return protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "s1", ID: "e1", Type: s.manifest.Name}}}
}
func (s *scripted) Generation() uint64                { return 1 }
func (s *scripted) Kill() error                       { return errors.New("scripted: no process") }
func (s *scripted) Restart(ctx context.Context) error { return nil }
func (s *scripted) Spawn(ctx context.Context) (conformance.RawPackage, error) {
	return nil, errors.New("scripted: no process")
}
func (s *scripted) OpenRun(workID, executionID string) (string, func() json.RawMessage) {
	return "run-1", func() json.RawMessage { return nil }
}

func (s *scripted) Wire() []conformance.WireLine         { return s.wire.Lines() }
func (s *scripted) WireChanged() <-chan struct{}         { return s.wire.Changed() }
func (s *scripted) line(fromExtension bool, text string) { s.wire.Add(fromExtension, []byte(text)) }

func (s *scripted) Call(ctx context.Context, method string, params, result any) error {
	raw, _ := json.Marshal(params)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id++
	s.line(false, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, s.id, method, raw))
	var out []string
	res, err := s.serve(method, raw, &out)
	for _, l := range out {
		s.line(true, l)
	}
	if err != nil {
		s.line(true, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"no"}}`, s.id))
		return protocol.Errorf(protocol.CodeMethodNotFound, "%s", method)
	}
	b, _ := json.Marshal(res)
	s.line(true, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, s.id, b))
	if result != nil {
		return json.Unmarshal(b, result)
	}
	return nil
}

const scriptedManifest = `{"name":"memo","version":"1.0.0","command":["memo"],"protocol":[1],
 "provides":{"extensions":[{"type":"memo","families":[{"name":"memo.note","rederivable":true}]}],
  "routes":[{"handler":"memo","display":true}],
  "operations":[{"name":"memo.add","kind":"handler","summary":"add"}]}}`

// good answers routes from their input alone and records each request
// once, in its own namespace.
func good(method string, params json.RawMessage, out *[]string) (any, error) {
	switch method {
	case "configure":
		return map[string]any{}, nil
	case "route.match":
		return protocol.RouteMatchResult{Match: true, Kind: "memo", Display: &protocol.Display{Title: "a memo"}}, nil
	case "operation.call":
		*out = append(*out, `{"jsonrpc":"2.0","id":1,"method":"kv.get","params":{"namespace":"memo","key":"k"}}`)
		return protocol.OperationCallResult{}, nil
	}
	return nil, errors.New("method not found")
}

func newScripted(t *testing.T, serve func(string, json.RawMessage, *[]string) (any, error)) *scripted {
	m, err := protocol.ParseManifest([]byte(scriptedManifest))
	require.NoError(t, err)
	return &scripted{manifest: m, serve: serve}
}

func TestPackageWireChecksPassAGoodPackage(t *testing.T) {
	ctx := context.Background()
	d := newScripted(t, good)
	assert.NoError(t, conformance.CheckPackageKVScoping(ctx, d))
	assert.NoError(t, conformance.CheckPackageRoutesPure(ctx, d))
	assert.NoError(t, conformance.CheckPackageRoutesDisplay(ctx, d))
	assert.NoError(t, conformance.CheckPackageStdoutHygiene(ctx, d))
	assert.NoError(t, conformance.CheckPackageOperationsIdempotent(ctx, d))
	assert.ErrorIs(t, conformance.CheckPackageSchemasCurrent(ctx, d), conformance.ErrNotApplicable, "it writes no payload: nothing to check")
	err := conformance.CheckPackageInTransactionDeadline(ctx, d)
	assert.ErrorIs(t, err, conformance.ErrNotApplicable, "nothing in-transaction is declared")
}

// The negative controls: each defect fails its check, and only its check.
func TestPackageWireChecksCatchEachDefect(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		serve  func(string, json.RawMessage, *[]string) (any, error)
		check  func(context.Context, conformance.PackageDriver) error
		others []func(context.Context, conformance.PackageDriver) error
		detail string
	}{
		{
			name: "foreign namespace",
			serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
				if method == "configure" {
					*out = append(*out, `{"jsonrpc":"2.0","id":7,"method":"kv.get","params":{"namespace":"core.extensions","key":"memo"}}`)
				}
				return good(method, params, out)
			},
			check:  conformance.CheckPackageKVScoping,
			others: []func(context.Context, conformance.PackageDriver) error{conformance.CheckPackageRoutesPure, conformance.CheckPackageStdoutHygiene},
			detail: `namespace "core.extensions"`,
		},
		{
			name: "stray stdout",
			serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
				if method == "operation.call" {
					*out = append(*out, "debug: adding a memo")
				}
				return good(method, params, out)
			},
			check:  conformance.CheckPackageStdoutHygiene,
			others: []func(context.Context, conformance.PackageDriver) error{conformance.CheckPackageKVScoping, conformance.CheckPackageRoutesPure},
			detail: "debug: adding a memo",
		},
		{
			name: "route with a side effect",
			serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
				if method == "route.match" {
					*out = append(*out, `{"jsonrpc":"2.0","id":9,"method":"kv.commit","params":{"puts":[{"namespace":"memo","key":"n","value":1}]}}`)
				}
				return good(method, params, out)
			},
			check:  conformance.CheckPackageRoutesPure,
			others: []func(context.Context, conformance.PackageDriver) error{conformance.CheckPackageKVScoping, conformance.CheckPackageStdoutHygiene},
			detail: "called the host while deciding",
		},
		{
			name: "effect on every call",
			serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
				if method == "operation.call" {
					*out = append(*out, `{"jsonrpc":"2.0","id":9,"method":"kv.commit","params":{"puts":[{"namespace":"memo","key":"n","value":1}]}}`)
				}
				return good(method, params, out)
			},
			check:  conformance.CheckPackageOperationsIdempotent,
			others: []func(context.Context, conformance.PackageDriver) error{conformance.CheckPackageKVScoping, conformance.CheckPackageRoutesPure},
			detail: "made its effect again",
		},
		{
			name: "display over its limits",
			serve: func(method string, params json.RawMessage, out *[]string) (any, error) {
				if method == "route.match" {
					return protocol.RouteMatchResult{Match: true, Display: &protocol.Display{Title: "a memo",
						Links: []protocol.DisplayLink{{Label: "run", URL: "javascript:alert(1)"}}}}, nil
				}
				return good(method, params, out)
			},
			check:  conformance.CheckPackageRoutesDisplay,
			others: []func(context.Context, conformance.PackageDriver) error{conformance.CheckPackageRoutesPure},
			detail: "http or https",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newScripted(t, tc.serve)
			err := tc.check(ctx, d)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.detail)
			for _, other := range tc.others {
				assert.NoError(t, other(ctx, newScripted(t, tc.serve)))
			}
		})
	}
}

// A check that observed nothing does not pass: when the package refuses
// every call a check makes, the check fails as "could not exercise",
// naming the input it tried; the negative control of a vacuous pass.
func TestPackageWireChecksRefuseVacuousPasses(t *testing.T) {
	ctx := context.Background()
	refuses := func(method string, params json.RawMessage, out *[]string) (any, error) {
		if method == "operation.call" || method == "route.match" {
			return nil, errors.New("invalid input")
		}
		return good(method, params, out)
	}
	err := conformance.CheckPackageOperationsIdempotent(ctx, newScripted(t, refuses))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "could not exercise: operation memo.add refused input {}")
	assert.Contains(t, err.Error(), conformance.InputsFile)

	err = conformance.CheckPackageRoutesPure(ctx, newScripted(t, refuses))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "could not exercise: route.match refused every Event")

	// A good package is exercised by the same checks.
	assert.NoError(t, conformance.CheckPackageOperationsIdempotent(ctx, newScripted(t, good)))
	assert.NoError(t, conformance.CheckPackageRoutesPure(ctx, newScripted(t, good)))
}

// The failure names the wire line it was seen at, so a report can show
// the wire around it.
func TestPackageWireChecksNameTheFailingLine(t *testing.T) {
	d := newScripted(t, func(method string, params json.RawMessage, out *[]string) (any, error) {
		if method == "operation.call" {
			*out = append(*out, "debug: adding a memo")
		}
		return good(method, params, out)
	})
	err := conformance.CheckPackageStdoutHygiene(context.Background(), d)
	require.Error(t, err)
	at, ok := conformance.WireIndex(err)
	require.True(t, ok)
	assert.Equal(t, "debug: adding a memo", string(d.Wire()[at].Line))
}
