package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestSupportedVersions(t *testing.T) {
	vs := protocol.SupportedVersions()
	require.NotEmpty(t, vs)
	assert.Equal(t, protocol.Version1, vs[0])
	assert.Equal(t, protocol.CurrentVersion, vs[len(vs)-1])
	for i := 1; i < len(vs); i++ {
		assert.Less(t, vs[i-1], vs[i], "not strictly increasing")
	}
	for _, v := range vs {
		assert.True(t, protocol.Supported(v))
	}
	assert.False(t, protocol.Supported(0))
	assert.False(t, protocol.Supported(protocol.CurrentVersion+1))
}

func TestNegotiate(t *testing.T) {
	type vs = []protocol.Version
	cases := []struct {
		name          string
		ours, theirs  vs
		want          protocol.Version
		wantRefusal   bool
		refusalString string
	}{
		{name: "same single", ours: vs{1}, theirs: vs{1}, want: 1},
		{name: "highest common", ours: vs{1, 2, 3}, theirs: vs{2, 3, 4}, want: 3},
		{name: "highest common unsorted", ours: vs{3, 1, 2}, theirs: vs{4, 2, 3}, want: 3},
		{name: "only old common", ours: vs{1, 2}, theirs: vs{1, 5}, want: 1},
		{name: "duplicates", ours: vs{2, 2, 1}, theirs: vs{1, 1, 2}, want: 2},
		{name: "disjoint", ours: vs{1, 2}, theirs: vs{3, 4}, wantRefusal: true,
			refusalString: "no common protocol version (ours [1 2], theirs [3 4])"},
		{name: "theirs empty", ours: vs{1}, theirs: nil, wantRefusal: true},
		{name: "ours empty", ours: nil, theirs: vs{1}, wantRefusal: true},
		{name: "zero is not a version", ours: vs{0}, theirs: vs{0}, wantRefusal: true},
		{name: "negative is not a version", ours: vs{-1}, theirs: vs{-1}, wantRefusal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.Negotiate(tc.ours, tc.theirs)
			if tc.wantRefusal {
				require.Error(t, err)
				assert.ErrorIs(t, err, protocol.ErrUnsupportedProtocolVersion)
				assert.Equal(t, protocol.CodeUnsupportedProtocolVersion, protocol.CodeOf(err))
				assert.Zero(t, got)
				if tc.refusalString != "" {
					assert.Equal(t, tc.refusalString, err.Error())
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
			}

			// Order-independent and symmetric: every permutation of both
			// lists, either way round, gives the same answer.
			for _, o := range permutations(tc.ours) {
				for _, th := range permutations(tc.theirs) {
					for _, pair := range [][2]vs{{o, th}, {th, o}} {
						g, e := protocol.Negotiate(pair[0], pair[1])
						assert.Equal(t, got, g, "ours %v theirs %v", pair[0], pair[1])
						assert.Equal(t, err != nil, e != nil, "ours %v theirs %v", pair[0], pair[1])
					}
				}
			}
			if err != nil {
				// Deterministic refusal: the same sets, in any order, give the same message.
				for _, o := range permutations(tc.ours) {
					for _, th := range permutations(tc.theirs) {
						_, e := protocol.Negotiate(o, th)
						assert.EqualError(t, e, err.Error())
					}
				}
			}
		})
	}
}

func TestNegotiateWithThisBuild(t *testing.T) {
	got, err := protocol.Negotiate(protocol.SupportedVersions(), []protocol.Version{protocol.CurrentVersion, protocol.CurrentVersion + 7})
	require.NoError(t, err)
	assert.Equal(t, protocol.CurrentVersion, got)
}

// permutations returns every ordering of vs (vs itself when empty).
func permutations(vs []protocol.Version) [][]protocol.Version {
	if len(vs) <= 1 {
		return [][]protocol.Version{vs}
	}
	var out [][]protocol.Version
	for i := range vs {
		rest := make([]protocol.Version, 0, len(vs)-1)
		rest = append(rest, vs[:i]...)
		rest = append(rest, vs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]protocol.Version{vs[i]}, p...))
		}
	}
	return out
}
