package daemon

import (
	"encoding/json"
	"strings"

	"github.com/open-conduit/open-conduit/runtime"
)

// readLastGeneration reads the latest stored generation.
func readLastGeneration(r runtime.ReadTx) (storedGeneration, bool, error) {
	var n int64
	e, found, err := r.KVGet(generationNamespace, currentKey)
	if err != nil || !found {
		return storedGeneration{}, false, err
	}
	if err := json.Unmarshal(e.Value, &n); err != nil {
		return storedGeneration{}, false, err
	}
	e, found, err = r.KVGet(generationNamespace, generationKey(n))
	if err != nil || !found {
		return storedGeneration{}, false, err
	}
	var g storedGeneration
	if err := json.Unmarshal(e.Value, &g); err != nil {
		return storedGeneration{}, false, err
	}
	return g, true, nil
}

func jsonPut(key string, v any) runtime.KVPut {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the daemon's own record types pass through here
	}
	return runtime.KVPut{Namespace: generationNamespace, Key: key, Value: b}
}

// storableDoc is a valid document as a JSON value; the empty document is
// the empty object.
func storableDoc(doc []byte) json.RawMessage {
	if strings.TrimSpace(string(doc)) == "" {
		return json.RawMessage(`{}`)
	}
	return append(json.RawMessage(nil), doc...)
}

func jsonValue(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
