package protocol

import "reflect"

// MessageShapesForTest lists, per method of messages.go, its params and
// result types.
func MessageShapesForTest() map[string][]reflect.Type {
	out := map[string][]reflect.Type{}
	for name, s := range messageShapes {
		out[name] = []reflect.Type{reflect.TypeOf(s.params), reflect.TypeOf(s.result)}
	}
	return out
}
