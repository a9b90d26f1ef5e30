package jsonrpc

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzLongStringScan holds skipString's fast path for long strings to the
// loop it cuts short: every line, built so that its strings are long
// enough to take the path, frames, validates and breaks the strict rule
// (notStrict, with its JSON path) exactly as without it, and checkStrict
// and validJSON agree too. The seed corpus is under
// testdata/fuzz/FuzzLongStringScan; its inputs are spliced in a string of
// at least longStringBytes.
func FuzzLongStringScan(f *testing.F) {
	f.Fuzz(func(t *testing.T, head, tail []byte, pad uint16) {
		fill := bytes.Repeat([]byte("QUJD"), int(pad%600)+longStringBytes/4)
		line := bytes.Join([][]byte{
			[]byte(`{"jsonrpc":"2.0","id":7,"method":"artifact.write","params":{"artifact_id":"a","data":"`),
			head, fill, tail,
		}, nil)
		for _, in := range [][]byte{line, append(bytes.Clone(line), `"}}`...), append(bytes.Clone(line), `"}`...)} {
			type outcome struct {
				m           inMessage
				err         error
				strict      string
				valid       bool
				skipEnd     int
				skipErr     error
				noteOff     int
				noteWhat    string
				noteInText  bool
				notePairLow int
			}
			run := func() outcome {
				var o outcome
				o.m, o.err = parseMessage(in)
				if err := checkStrict(in); err != nil {
					o.strict = err.Error()
				}
				o.valid = validJSON(in)
				// The string that starts at the params' data member.
				at := bytes.Index(in, []byte(`"data":"`)) + len(`"data":`)
				var sn strictNote
				sn.reset()
				o.skipEnd, o.skipErr = skipString(in, at, &sn)
				o.noteOff, o.noteWhat, o.noteInText, o.notePairLow = sn.off, sn.what, sn.inText, sn.pairLow
				return o
			}
			fast := run()
			longStringFastPath = false
			slow := run()
			longStringFastPath = true
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%q:\nfast path %+v\nthe loop  %+v", in, fast, slow)
			}
		}
	})
}
