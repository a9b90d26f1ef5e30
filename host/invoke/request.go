package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// Request is one call to make.
type Request struct {
	// Dir is the package directory, holding open-conduit-extension.json.
	Dir string
	// Method is the host-to-extension method to call: one the manifest
	// enables, not a notification and not a lifecycle method (initialize,
	// configure and shutdown are the invocation's own).
	Method string
	// Params are the call's params: a JSON object, read strictly
	// (ParseParams). Nil sends {}.
	Params json.RawMessage
	// Env is the complete environment of the process, NAME=VALUE each.
	// Nothing else reaches it: not PATH, not HOME, nothing of the
	// caller's environment that is not listed here.
	Env []string
	// Executable runs a package whose command is protocol.HostRunCommand
	// (a package bundled in the binary): the open-conduit binary. The
	// default, os.Executable, is right for the open-conduit command itself.
	Executable string
	// HostVersion is the host's release, sent in initialize.
	HostVersion string
	// Progress, when set, is told each stage as it begins: launch,
	// initialize, configure, call, shutdown, cleanup.
	Progress func(stage string)
}

// The host's name in initialize.
const hostName = "open-conduit"

// ParseParams reads a call's params: one strict JSON object (see the
// package doc), returned compacted onto one line. A refusal is
// invalid_invocation and never echoes the input.
func ParseParams(data []byte) (json.RawMessage, error) {
	if err := checkStrict(data); err != nil {
		return nil, newError(CodeInvalidInvocation, "the params are not strict JSON: "+err.Error())
	}
	if !isObject(data) {
		return nil, newError(CodeInvalidInvocation, "the params are not a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, newError(CodeInvalidInvocation, "the params are not JSON")
	}
	return b.Bytes(), nil
}

// checkEnv holds the environment to NAME=VALUE entries with distinct
// names. A refusal names the entry by its index, never its text, which
// may be a secret written in the wrong place.
func checkEnv(env []string) error {
	seen := map[string]bool{}
	for i, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !envName(name) || strings.ContainsRune(value, 0) {
			return newError(CodeInvalidInvocation, fmt.Sprintf("environment entry %d is not NAME=VALUE with NAME a letter or underscore followed by letters, digits and underscores", i+1))
		}
		if seen[name] {
			return newError(CodeInvalidInvocation, fmt.Sprintf("environment entry %d names a variable an earlier entry sets", i+1))
		}
		seen[name] = true
	}
	return nil
}

func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// lifecycle are the methods the invocation sends itself.
var lifecycle = map[string]bool{"initialize": true, "configure": true, "shutdown": true}

// checkMethod refuses a method the invocation cannot call on m.
func checkMethod(m *protocol.Manifest, name string) error {
	method, ok := protocol.LookupMethod(name)
	switch {
	case !ok:
		return newError(CodeInvalidInvocation, "the method is not in the protocol's catalogue")
	case lifecycle[name]:
		return newError(CodeInvalidInvocation, fmt.Sprintf("%s is part of every invocation; name the method to call after it", name))
	case method.Direction != protocol.HostToExtension || method.Notification:
		return newError(CodeInvalidInvocation, fmt.Sprintf("%s is not a request the host sends to an extension", name))
	case !m.Enabled(name):
		return newError(CodeInvalidInvocation, fmt.Sprintf("the package's manifest does not enable %s", name))
	}
	return nil
}

// plan is a checked request: what to start and what to send.
type plan struct {
	manifest *protocol.Manifest
	dir      string
	path     string
	args     []string
	params   json.RawMessage
}

// prepare checks everything about req that can be checked before a
// process exists.
func prepare(req Request) (*plan, error) {
	if req.Dir == "" {
		return nil, newError(CodeInvalidInvocation, "no package directory")
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return nil, newError(CodeInvalidInvocation, "the package directory cannot be resolved")
	}
	m, err := protocol.LoadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, newError(CodeInvalidInvocation, "the package directory holds no "+protocol.ManifestFile)
	case err != nil:
		// The manifest's own refusal names rules and fields of the
		// package's file, never a caller's secret, but it may quote the
		// file: say only that it is refused, `extension validate` says why.
		return nil, newError(CodeInvalidInvocation, "the package's manifest is invalid (open-conduit extension validate says why)")
	}
	if err := checkMethod(m, req.Method); err != nil {
		return nil, err
	}
	p := &plan{manifest: m, dir: dir, params: json.RawMessage("{}")}
	if req.Params != nil {
		if p.params, err = ParseParams(req.Params); err != nil {
			return nil, err
		}
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, err
	}
	if m.RunsOnHost() {
		exe := req.Executable
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, newError(CodePrerequisiteMissing, "the host's own executable cannot be found to run a bundled package")
			}
		}
		p.path, p.args = exe, m.Command[1:]
	} else {
		p.path, p.args = filepath.Join(dir, filepath.FromSlash(m.Command[0])), m.Command[1:]
	}
	info, err := os.Stat(p.path)
	switch {
	case err != nil:
		return nil, newError(CodePrerequisiteMissing, "the package's program does not exist or cannot be read")
	case !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0:
		return nil, newError(CodePrerequisiteMissing, "the package's program is not an executable file")
	}
	return p, nil
}
