// Command layoutext is the package the packaging tests install, update
// and roll back: it serves the manifest in its working directory (so one
// binary is every release, each a directory with its own manifest) and,
// when the host reports kv.stored < kv.declared, migrates by recording
// {"from": stored, "to": declared} under the key "migrated" of its KV,
// which the tests read back through the API. Any config object validates.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func main() {
	raw, err := os.ReadFile(protocol.ManifestFile)
	if err == nil {
		err = serve(raw)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "layoutext:", err)
		os.Exit(1)
	}
}

func serve(raw []byte) error {
	m, err := protocol.ParseManifest(raw)
	if err != nil {
		return err
	}
	return sdk.Serve(&sdk.Extension{Manifest: raw,
		Migrate: func(ctx context.Context, h *sdk.Host, stored, declared int) error {
			value, _ := json.Marshal(map[string]int{"from": stored, "to": declared})
			_, err := h.Commit(ctx, protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: m.Name, Key: "migrated", Value: value}}})
			return err
		},
		Configure: func(context.Context, *sdk.Host, protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{}, nil
		},
		Validate: func(context.Context, protocol.ValidateParams) (protocol.ValidateResult, error) {
			return protocol.ValidateResult{}, nil
		},
	})
}
