package packages

import (
	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

// The origins an Entry names.
const (
	OriginInstalled = "installed"
	OriginBundled   = "bundled"
)

// Entry is one package as `extension list` shows it: what is on disk, and
// when a daemon runs, how its process is doing.
type Entry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Protocol are the versions the manifest speaks.
	Protocol []protocol.Version `json:"protocol,omitempty"`
	// Origin is OriginInstalled or OriginBundled.
	Origin string `json:"origin"`
	// ReplacesBundled marks an installed package that a bundled one of
	// the same name stands behind: removing it brings that one back.
	ReplacesBundled bool     `json:"replaces_bundled,omitempty"`
	Permissions     []string `json:"permissions"`
	KVVersion       int      `json:"kv_version"`
	Dir             string   `json:"dir"`
	// Refused says why discovery skipped it ("" when admitted).
	Refused string `json:"refused,omitempty"`
	// Daemon is set when a daemon answered: then State, Restarts,
	// Negotiated and LastError are its.
	Daemon     bool             `json:"daemon"`
	State      string           `json:"state,omitempty"`
	Restarts   int              `json:"restarts"`
	Negotiated protocol.Version `json:"negotiated_protocol,omitempty"`
	LastError  string           `json:"last_error,omitempty"`
}

// List is every package under installed and bundled, as the daemon would
// discover them: installed first, a bundled package hidden behind an
// installed one of its name (which is marked ReplacesBundled), refused
// ones with why.
func List(installed, bundled string) ([]Entry, error) {
	pkgs, problems, err := host.DiscoverAll(installed, bundled)
	if err != nil {
		return nil, err
	}
	behind := map[string]bool{}
	if bundled != "" {
		bpkgs, bproblems, err := host.Discover(bundled)
		if err != nil {
			return nil, err
		}
		for _, p := range bpkgs {
			behind[p.Name] = true
		}
		for _, p := range bproblems {
			behind[p.Name] = true
		}
	}
	origin := func(b bool) string {
		if b {
			return OriginBundled
		}
		return OriginInstalled
	}
	out := []Entry{}
	for _, p := range pkgs {
		m := p.Manifest
		e := Entry{Name: p.Name, Version: m.Version, Protocol: m.Protocol, Origin: origin(p.Bundled),
			Permissions: append([]string{}, m.Permissions...), KVVersion: m.KVVersion, Dir: p.Dir}
		e.ReplacesBundled = !p.Bundled && behind[p.Name]
		out = append(out, e)
	}
	for _, p := range problems {
		out = append(out, Entry{Name: p.Name, Origin: origin(p.Bundled), Permissions: []string{}, Dir: p.Dir,
			Refused: p.Err.Error(), ReplacesBundled: !p.Bundled && behind[p.Name]})
	}
	return out, nil
}
