package protocol

import (
	"reflect"
	"sort"
)

// ShapeTypesForTest lists the params and result types of methodShapes.
func ShapeTypesForTest() []reflect.Type { return shapeTypes(methodShapes) }

// AllShapeTypesForTest lists the params and result types of every method
// with wire types.
func AllShapeTypesForTest() []reflect.Type { return shapeTypes(allShapes()) }

// AllShapeMethodsForTest lists every method with wire types.
func AllShapeMethodsForTest() []string {
	out := make([]string, 0)
	for name := range allShapes() {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func shapeTypes(shapes map[string]methodShape) []reflect.Type {
	seen := map[reflect.Type]bool{}
	var out []reflect.Type
	for _, s := range shapes {
		for _, v := range []any{s.params, s.result} {
			if v == nil {
				continue
			}
			typ := reflect.TypeOf(v)
			if !seen[typ] {
				seen[typ] = true
				out = append(out, typ)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ShapeMethodsForTest lists the methods of methodShapes.
func ShapeMethodsForTest() []string {
	out := make([]string, 0, len(methodShapes))
	for name := range methodShapes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// RenderReferenceForTest renders docs/protocol.md with the given doc
// comments ("Type" and "Type.Field").
func RenderReferenceForTest(docs map[string]string) []byte {
	return renderReference(referenceDocs(docs))
}

// MethodErrorNamesForTest lists the methods methodErrors describes.
func MethodErrorNamesForTest() []string {
	out := make([]string, 0, len(methodErrors))
	for name := range methodErrors {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// ExampleManifestForTest is the manifest of the reference's session example.
var ExampleManifestForTest = exampleManifest

// GoNamesForTest lists the Go names the reference spells out.
func GoNamesForTest() []string {
	var out []string
	for _, n := range goNameTable() {
		out = append(out, n.name)
	}
	return out
}

// NotServedMarkers are the lines the reference gives a catalogued method
// without wire types.
var NotServedMarkers = []string{
	notServedLine(Method{Direction: ExtensionToHost}),
	notServedLine(Method{Direction: HostToExtension}),
	notServedLine(Method{Direction: HostToExtension, Notification: true}),
	transportMethods["$/cancel"],
}

// OperationCallFastForTest reports whether the hand-written decoders of
// operation.call take their fast path for data (rather than handing it to
// encoding/json), for the tests that the fast path is what they measure.
func OperationCallFastForTest(data []byte) (params, result bool) {
	var p OperationCallParams
	var r OperationCallResult
	return decodeOperationCallParams(data, &p, false), decodeOperationCallResult(data, &r, false)
}

// OperationCallCheckedFastForTest is OperationCallFastForTest for
// DecodeCheckedJSON.
func OperationCallCheckedFastForTest(data []byte) (params, result bool) {
	var p OperationCallParams
	var r OperationCallResult
	return decodeOperationCallParams(data, &p, true), decodeOperationCallResult(data, &r, true)
}

// ArtifactWriteFastForTest reports whether ArtifactWriteParams.DecodeJSON
// takes its fast path for doc.
func ArtifactWriteFastForTest(doc []byte) bool {
	var p ArtifactWriteParams
	return decodeArtifactWriteParams(doc, &p)
}

// AuthorityFastForTest reads data as the fast decoder of operation.call
// reads its authority member, reporting whether the fast path took it.
func AuthorityFastForTest(data []byte) (Authority, bool) {
	var a Authority
	d := jsonScan{b: data}
	return a, d.authorityInto(&a)
}
