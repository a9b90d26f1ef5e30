package protocol_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

var update = flag.Bool("update", false, "rewrite docs/protocol.md from the package")

const referencePath = "../docs/protocol.md"

// wireDocs reads the doc comments of the package's types and fields (the
// wire and manifest types among them), so the reference describes each
// field in the words of its Go declaration.
func wireDocs(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments)
		require.NoError(t, err)
		addDocs(docs, file)
	}
	return docs
}

func addDocs(docs map[string]string, file *ast.File) {
	text := func(groups ...*ast.CommentGroup) string {
		for _, g := range groups {
			if s := strings.Join(strings.Fields(g.Text()), " "); s != "" {
				return s
			}
		}
		return ""
	}
	for _, decl := range file.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			if doc := text(ts.Doc, gd.Doc); doc != "" {
				docs[ts.Name.Name] = doc
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				doc := text(f.Doc, f.Comment)
				for _, n := range f.Names {
					if doc != "" {
						docs[ts.Name.Name+"."+n.Name] = doc
					}
				}
			}
		}
	}
}

func TestReferenceIsCurrent(t *testing.T) {
	got := append(protocol.RenderReferenceForTest(wireDocs(t)), '\n')
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(referencePath), 0o755))
		require.NoError(t, os.WriteFile(referencePath, got, 0o644))
		return
	}
	want, err := os.ReadFile(referencePath)
	require.NoError(t, err, "run: go test ./protocol -run TestReferenceIsCurrent -update")
	if line, ok := firstDifference(want, got); ok {
		t.Errorf("docs/protocol.md is stale from line %d on; run: go test ./protocol -run TestReferenceIsCurrent -update", line)
	}
}

// firstDifference is the first line (from 1) where a and b differ.
func firstDifference(a, b []byte) (line int, differ bool) {
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(al) || i < len(bl); i++ {
		if i >= len(al) || i >= len(bl) || !bytes.Equal(al[i], bl[i]) {
			return i + 1, true
		}
	}
	return 0, false
}

func TestFirstDifference(t *testing.T) {
	doc := []byte("a\nb\nc\n")
	_, differ := firstDifference(doc, doc)
	assert.False(t, differ)
	line, differ := firstDifference(doc, []byte("a\nB\nc\n"))
	assert.True(t, differ)
	assert.Equal(t, 2, line)
	line, differ = firstDifference(doc, []byte("a\nb\nc\nd"))
	assert.True(t, differ)
	assert.Equal(t, 4, line)
	line, differ = firstDifference(doc, doc[:len(doc)-1])
	assert.True(t, differ, "a missing final newline is a difference")
	assert.Equal(t, 4, line)
}

func TestReferenceIsDeterministic(t *testing.T) {
	docs := wireDocs(t)
	first := protocol.RenderReferenceForTest(docs)
	for range 5 {
		assert.Equal(t, string(first), string(protocol.RenderReferenceForTest(docs)))
	}
}

func TestReferenceContent(t *testing.T) {
	doc := string(protocol.RenderReferenceForTest(wireDocs(t)))
	has := func(s string) {
		t.Helper()
		assert.True(t, strings.Contains(doc, s), "the reference lacks %q", s)
	}
	for _, c := range protocol.Codes() {
		has(fmt.Sprintf("| `%s` | %d |", c, c.WireNumber()))
	}
	for _, name := range protocol.AllShapeMethodsForTest() {
		has("### `" + name + "`")
	}
	for _, m := range protocol.Methods() {
		has("### `" + m.Name + "`")
	}
	for _, typ := range protocol.AllShapeTypesForTest() {
		has("### " + typ.Name() + "\n")
	}
	for _, rule := range protocol.ManifestRules() {
		has("| `" + rule.ID + "` |")
	}
	has("16 MiB (16777216 bytes)")
	has("256 KiB (262144 bytes)")
	has("at most 64 requests")
	has("within 250 ms")
	has(protocol.EmittedEventID("notes/inbox", "d-1"))
	has("| `state_dir` | string |  | The extension's private state directory")
	has("- Params: [KVCommitParams](#kvcommitparams)")
	for i, line := range strings.Split(doc, "\n") {
		assert.Equal(t, strings.TrimRight(line, " \t"), line, "trailing space on line %d", i+1)
	}
}

func TestWireDocsCoverEveryField(t *testing.T) {
	docs := wireDocs(t)
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[typ] = true
		assert.NotEmpty(t, docs[typ.Name()], "type %s has no doc comment", typ.Name())
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			assert.NotEmpty(t, docs[typ.Name()+"."+f.Name], "field %s.%s has no doc comment", typ.Name(), f.Name)
			walk(f.Type)
		}
	}
	for _, typ := range protocol.AllShapeTypesForTest() {
		walk(typ)
	}
}

func TestMethodErrorsNameShapedMethods(t *testing.T) {
	assert.Equal(t, protocol.ShapeMethodsForTest(), protocol.MethodErrorNamesForTest(),
		"methodErrors and methodShapes list different methods")
}

func TestReferenceExampleManifestIsValid(t *testing.T) {
	m, err := protocol.ParseManifest(protocol.ExampleManifestForTest)
	require.NoError(t, err)
	assert.Equal(t, "notes", m.Name)
}
