package protocol_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// methodSections splits the reference's Methods section by method.
func methodSections(doc string) map[string]string {
	out := map[string]string{}
	_, methods, _ := strings.Cut(doc, "\n## Methods\n")
	methods, _, _ = strings.Cut(methods, "\n## ")
	for _, part := range strings.Split(methods, "\n### `")[1:] {
		name, body, _ := strings.Cut(part, "`")
		out[name] = body
	}
	return out
}

// undocumentedMethods lists the catalogued methods whose section in doc
// has neither a params line nor a plain "not served" line.
func undocumentedMethods(doc string) []string {
	sections := methodSections(doc)
	var out []string
	for _, m := range protocol.Methods() {
		body, ok := sections[m.Name]
		documented := ok && strings.Contains(body, "\n- Params: ")
		for _, marker := range protocol.NotServedMarkers {
			documented = documented || ok && strings.Contains(body, "\n- "+marker+"\n")
		}
		if !documented {
			out = append(out, m.Name)
		}
	}
	return out
}

// TestReferenceCoversEveryMethod: every catalogued method has its params
// and result in the reference, or a line saying this host does not serve
// it yet.
func TestReferenceCoversEveryMethod(t *testing.T) {
	doc := string(protocol.RenderReferenceForTest(wireDocs(t)))
	assert.Empty(t, undocumentedMethods(doc))
	for _, m := range protocol.Methods() {
		if !protocol.HasWireTypes(m.Name) {
			continue
		}
		assert.Contains(t, methodSections(doc)[m.Name], "\n- Params: ", m.Name)
	}

	// The check fails a page where a method has neither, as the page had
	// for 56 methods before it said so.
	stripped := doc
	for _, marker := range protocol.NotServedMarkers {
		stripped = strings.ReplaceAll(stripped, "\n- "+marker+"\n", "\n")
	}
	missing := undocumentedMethods(stripped)
	assert.Contains(t, missing, "event.render")
	assert.NotContains(t, missing, "kv.commit")
}

// exportedNames lists the package's exported functions, methods,
// constants and variables (types have tables of their own).
func exportedNames(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() {
					set[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							if n.IsExported() {
								set[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// englishWords are exported names that the page also uses as plain
// words ("## Methods").
var englishWords = []string{"Methods", "Where"}

// unexplainedGoNames lists the package's Go names that doc uses outside
// its table of Go names without that table explaining them.
func unexplainedGoNames(doc string, exported, explained []string) []string {
	before, after, _ := strings.Cut(doc, "\n## Go names used on this page\n")
	if _, rest, ok := strings.Cut(after, "\n## "); ok {
		before += rest
	}
	var out []string
	for _, w := range regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`).FindAllString(before, -1) {
		if slices.Contains(exported, w) && !slices.Contains(explained, w) && !slices.Contains(englishWords, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// TestReferenceSpellsOutGoNames: a Go constant or function named on the
// page (mostly by the doc comments the field tables quote) is spelled out
// with its value in the table of Go names, so an author in another
// language never has to read Go to learn MaxLossBytes.
func TestReferenceSpellsOutGoNames(t *testing.T) {
	doc := string(protocol.RenderReferenceForTest(wireDocs(t)))
	exported := exportedNames(t)
	explained := protocol.GoNamesForTest()
	assert.Empty(t, unexplainedGoNames(doc, exported, explained), "add these to goNameTable in protocol/reference.go")
	for _, name := range explained {
		assert.Contains(t, exported, name, "goNameTable explains %s, which the package does not export", name)
	}
	assert.Contains(t, doc, "| `MaxLossBytes` | 200 bytes")
	assert.Contains(t, doc, "| `HostRunCommand` | The `command` of a package the binary serves itself: exactly `[\"open-conduit\",\"extension-run\",\"NAME\"]`")

	// Without the table, the names it explains are reported.
	assert.Subset(t, unexplainedGoNames(doc, exported, nil), []string{"CheckWrite", "HostRunCommand", "KnownPermissions", "MaxLossBytes", "OwnsDotted", "PoolJobs"})
}

// TestReferenceStatesTheHostRules: the rules section is on the page with
// the values the host takes from this package.
func TestReferenceStatesTheHostRules(t *testing.T) {
	doc := string(protocol.RenderReferenceForTest(wireDocs(t)))
	for _, s := range []string{
		"answers every request the extension sends before the",
		"`unauthorized`, applies nothing",
		"answered -32800 with no `data`",
		"**`shutdown` counts toward the 64 in flight.**",
		"The host waits up to 5 s for the answer to `shutdown`",
		"answer `unsupported`",
		"`PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `TZ`, `TMPDIR`, `TERM` and `LC_*`",
		"`OS_` or `OPEN_CONDUIT_`",
		"`#!/usr/bin/env node`",
		"A source may nest: `notes/inbox/archive`",
	} {
		assert.Contains(t, doc, s)
	}
	assert.True(t, protocol.SourceNamespace("notes", "notes/inbox/archive"), "the page says a source may nest")
	assert.False(t, protocol.SourceNamespace("notes", "notes/"), "the page says at least one byte follows the slash")
}
