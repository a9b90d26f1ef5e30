package protocol_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/open-conduit/open-conduit/protocol"
)

// FuzzManifest: reading a manifest never panics, every refusal is a
// manifest error, and a manifest that is accepted encodes to JSON that reads
// back, and validates, as the same manifest.
func FuzzManifest(f *testing.F) {
	for _, name := range []string{"ingress-support.json", "executor-workspace.json", "scheduled-reporting.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(minimalJSON))
	full, err := json.Marshal(fullManifest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := protocol.ParseManifest(data)
		if err != nil {
			if m != nil {
				t.Fatalf("a refused manifest came back: %v", err)
			}
			if !errors.Is(err, protocol.ErrInvalidManifest) && !errors.Is(err, protocol.ErrNewerManifest) {
				t.Fatalf("refusal is not a manifest error: %v", err)
			}
			if len(protocol.ManifestErrors(err)) == 0 {
				t.Fatalf("refusal names no rule: %v", err)
			}
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("an accepted manifest does not encode: %v", err)
		}
		again, err := protocol.ParseManifest(out)
		if err != nil {
			t.Fatalf("the encoding of an accepted manifest is refused: %v\n%s", err, out)
		}
		if err := again.Validate(); err != nil {
			t.Fatalf("re-read manifest does not validate: %v", err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", data, out)
		}
	})
}
