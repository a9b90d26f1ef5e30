package protocol

import "slices"

// Version is a protocol version. Versions are integers; one changes only
// for a breaking change. Additive methods and manifest fields ship without
// a new version.
type Version int

// The versions this build speaks.
const (
	// Version1 is the first protocol version.
	Version1 Version = 1

	// CurrentVersion is the newest version this build speaks.
	CurrentVersion = Version1
)

// SupportedVersions lists every version this build speaks, oldest first.
func SupportedVersions() []Version { return []Version{Version1} }

// Supported reports whether this build speaks v.
func Supported(v Version) bool { return slices.Contains(SupportedVersions(), v) }

// Negotiate picks the highest version that both ours and theirs list;
// versions below 1 are ignored. With no common version it returns an *Error
// coded unsupported_protocol_version (errors.Is(err,
// ErrUnsupportedProtocolVersion) holds) that names both lists. The refusal is deterministic: it
// depends on the two sets of versions only, not on their order.
func Negotiate(ours, theirs []Version) (Version, error) {
	best := Version(0)
	for _, v := range ours {
		if v > best && slices.Contains(theirs, v) {
			best = v
		}
	}
	if best == 0 {
		return 0, Errorf(CodeUnsupportedProtocolVersion, "no common protocol version (ours %v, theirs %v)",
			sortedVersions(ours), sortedVersions(theirs))
	}
	return best, nil
}

// sortedVersions is vs sorted, without duplicates, for a stable message.
func sortedVersions(vs []Version) []Version {
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out)
}
