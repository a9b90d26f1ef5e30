package invoke_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host/invoke"
)

// TestCodesMapOneToOneOntoSentinels reads errors.go: every Code constant
// and every Err variable it declares must pair up one to one through
// Sentinel, and an error of each code must match its own sentinel only.
func TestCodesMapOneToOneOntoSentinels(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codeConsts, errVars []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for _, n := range vs.Names {
				switch {
				case g.Tok == token.CONST && strings.HasPrefix(n.Name, "Code"):
					codeConsts = append(codeConsts, n.Name)
				case g.Tok == token.VAR && strings.HasPrefix(n.Name, "Err"):
					errVars = append(errVars, n.Name)
				}
			}
		}
	}
	codes := invoke.Codes()
	require.NotEmpty(t, codes)
	assert.Len(t, codeConsts, len(codes), "every Code constant is in the table")
	assert.Len(t, errVars, len(codes), "every Err sentinel is in the table")
	seen := map[invoke.Code]bool{}
	for _, c := range codes {
		assert.False(t, seen[c], "%s is listed twice", c)
		seen[c] = true
		s := invoke.Sentinel(c)
		require.NotNil(t, s, c)
		assert.Equal(t, c, s.Code)
		assert.Equal(t, c, invoke.CodeOf(s))
		e := invoke.NewError(c, "what happened")
		assert.Equal(t, c, invoke.CodeOf(e))
		for _, other := range codes {
			assert.Equal(t, c == other, errors.Is(e, invoke.Sentinel(other)), "%s is %s", c, other)
		}
	}
	assert.Nil(t, invoke.Sentinel("no_such_code"))
	assert.Equal(t, invoke.Code(""), invoke.CodeOf(errors.New("plain")))

	// An error with a cleanup failure after it matches both sentinels.
	e := invoke.NewError(invoke.CodeTimeout, "late")
	e.Cleanup = invoke.NewError(invoke.CodeCleanupFailed, "not reaped")
	assert.ErrorIs(t, e, invoke.ErrTimeout)
	assert.ErrorIs(t, e, invoke.ErrCleanupFailed)
	assert.NotErrorIs(t, e, invoke.ErrPluginFailed)
	assert.Equal(t, invoke.CodeTimeout, invoke.CodeOf(e))
}
