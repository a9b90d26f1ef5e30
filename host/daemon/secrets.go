package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/open-conduit/open-conduit/runtime"
)

// maxSecretBytes bounds a file: secret.
const maxSecretBytes = 64 << 10

// secretResolver resolves a connection's secret references for one
// package: env:NAME from the daemon's environment, file:PATH from the
// file (trailing newline trimmed). The host service has already decided
// that the package may have them; values never reach a log or an
// environment.
type secretResolver struct {
	d   *Daemon
	pkg string
}

func (s *secretResolver) ResolveSecrets(ctx context.Context, connection string, names []string) (map[string]string, error) {
	s.d.mu.Lock()
	cfg := s.d.current
	s.d.mu.Unlock()
	var refs map[string]string
	for _, c := range cfg.Connections {
		if c.Name == connection {
			refs = c.SecretRefs
		}
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		ref, ok := refs[name]
		if !ok {
			return nil, fmt.Errorf("%w: connection %q has no secret %q", runtime.ErrNotFound, connection, name)
		}
		v, err := s.resolve(ref)
		if err != nil {
			// The reference names where the secret lives, not the secret,
			// but a refusal still names only the connection and key.
			return nil, fmt.Errorf("%w: secret %q of connection %q: %v", runtime.ErrNotFound, name, connection, err)
		}
		out[name] = v
	}
	return out, nil
}

func (s *secretResolver) resolve(ref string) (string, error) {
	kind, rest, _ := strings.Cut(ref, ":")
	switch kind {
	case "env":
		for _, kv := range s.d.environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && k == rest {
				return v, nil
			}
		}
		return "", fmt.Errorf("the variable is not set")
	case "file":
		f, err := os.Open(rest)
		if err != nil {
			return "", fmt.Errorf("the file cannot be read")
		}
		defer f.Close()
		buf := make([]byte, maxSecretBytes+1)
		n, _ := f.Read(buf)
		if n > maxSecretBytes {
			return "", fmt.Errorf("the file is over %d bytes", maxSecretBytes)
		}
		return strings.TrimRight(string(buf[:n]), "\r\n"), nil
	}
	return "", fmt.Errorf("unknown reference kind")
}
