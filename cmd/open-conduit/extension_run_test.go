package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/jsonrpc"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

func TestExtensionRunUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"notes", "extra"}, {"no-such-extension"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitUsage, extensionRunCommand(args, &stdout, &stderr), "%q", args)
		assert.Empty(t, stdout.String(), "stdout belongs to the protocol")
		assert.Contains(t, stderr.String(), "notes, runner", "%q: the refusal lists what is bundled", args)
	}
}

// TestExtensionRunServesBundled serves each bundled extension the way
// open-conduit extension-run NAME does, over pipes, and checks that it
// answers initialize with the manifest in its directory, which is valid
// and names exactly this command.
func TestExtensionRunServesBundled(t *testing.T) {
	for _, name := range []string{"notes", "runner", "schedule"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "extensions", name)
			report := validateManifest(dir)
			require.True(t, report.Valid, "%+v", report.Problems)
			m, err := protocol.LoadManifest(dir)
			require.NoError(t, err)
			assert.True(t, m.RunsOnHost(), "the manifest's command is open-conduit extension-run %s", name)

			toExtR, toExtW := io.Pipe()
			fromExtR, fromExtW := io.Pipe()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			old := serveExtension
			serveExtension = func(ext *sdk.Extension) error { return sdk.ServeConn(ctx, toExtR, fromExtW, ext) }
			defer func() { serveExtension = old }()
			code := make(chan int, 1)
			var stderr bytes.Buffer
			go func() { code <- extensionRunCommand([]string{name}, io.Discard, &stderr) }()

			conn := jsonrpc.NewConn(fromExtR, toExtW, nil, &jsonrpc.Options{DecodeError: sdk.DecodeError})
			var init protocol.InitializeResult
			require.NoError(t, conn.Call(ctx, "initialize", protocol.InitializeParams{ProtocolVersions: protocol.SupportedVersions(),
				StateDir: t.TempDir()}, &init))
			file, err := os.ReadFile(filepath.Join(dir, protocol.ManifestFile))
			require.NoError(t, err)
			assert.JSONEq(t, string(file), string(init.Manifest))
			require.NoError(t, conn.Call(ctx, "shutdown", protocol.Empty{}, nil))
			assert.Equal(t, exitOK, <-code, stderr.String())
			conn.Close()
		})
	}
}
