// Command layoutext is the package the packaging tests install, update
// and roll back: it serves the manifest in its working directory (so one
// binary is every release, each a directory with its own manifest) and,
// when the host reports kv.stored < kv.declared, migrates by recording
// {"from": stored, "to": declared} under the key "migrated" of its KV,
// which the tests read back through the API. Any config object validates.
//
// At initialize it takes an exclusive lock in its private state
// directory (the same for every release of the package) and fails if
// another process holds it: a host that started a new release before the
// old one stopped would see the new one fail to start.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
		Initialize: func(_ context.Context, p protocol.InitializeParams) error {
			return lockRelease(p.StateDir)
		},
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

// held keeps the release lock's file open for the process's life.
var held *os.File

func lockRelease(stateDir string) error {
	if stateDir == "" {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "release.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("another release of this package is running: %w", err)
	}
	held = f
	return nil
}
