package conformance

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

// migratingManifest is a package at KV layout 2.
const migratingManifest = `{"name":"memo","version":"3.0.0","command":["memo"],"protocol":[1],"kv_version":2,
 "provides":{"operations":[{"name":"memo.add","kind":"handler","summary":"add"}]}}`

// frozenManifest is a package at KV layout 0: nothing to migrate.
const frozenManifest = `{"name":"memo","version":"1.0.0","command":["memo"],"protocol":[1],"provides":{}}`

func migratingManifestValue(t testing.TB) *protocol.Manifest {
	m, err := protocol.ParseManifest([]byte(migratingManifest))
	require.NoError(t, err)
	return m
}

func TestParseKVLayouts(t *testing.T) {
	in, err := ParseInputs([]byte(`{"kv_layouts": [
	  {"stored": 0, "seed": [{"namespace": "memo", "key": "n1", "value": {"b": 1, "a": 2}}],
	   "want": [{"namespace": "memo", "key": "n1", "value": null}, {"namespace": "memo.index", "key": "note/n1", "value": {"b": 1, "a": 2}}]},
	  {"stored": 1, "seed": [], "want": [{"namespace": "memo.index", "key": "count", "value": {"notes": 0}}]}
	]}`), migratingManifestValue(t))
	require.NoError(t, err)
	require.Len(t, in.KVLayouts, 2)
	first := in.KVLayouts[0]
	assert.Equal(t, 0, first.Stored)
	require.Len(t, first.Seed, 1)
	assert.Equal(t, `{"b":1,"a":2}`, string(first.Seed[0].Value), "member order as written")
	require.Len(t, first.Want, 2)
	assert.True(t, first.Want[0].absent(), "null wants the entry gone")
	assert.False(t, first.Want[1].absent())
	assert.Equal(t, 1, in.KVLayouts[1].Stored)
	assert.Empty(t, in.KVLayouts[1].Seed, "an older layout may have left nothing")
}

func TestParseKVLayoutsRefusals(t *testing.T) {
	entry := `{"namespace": "memo", "key": "k", "value": 1}`
	layout := func(stored, seed, want string) string {
		return `{"kv_layouts": [{"stored": ` + stored + `, "seed": [` + seed + `], "want": [` + want + `]}]}`
	}
	cases := map[string]struct {
		manifest string
		data     string
		path     string
	}{
		"no migration declared": {frozenManifest, layout("0", entry, entry), "$.kv_layouts"},
		"not a list":            {migratingManifest, `{"kv_layouts": {}}`, "$.kv_layouts"},
		"empty list":            {migratingManifest, `{"kv_layouts": []}`, "$.kv_layouts"},
		"stored current":        {migratingManifest, layout("2", entry, entry), "$.kv_layouts[0].stored"},
		"stored negative":       {migratingManifest, layout("-1", entry, entry), "$.kv_layouts[0].stored"},
		"stored fraction":       {migratingManifest, layout("0.5", entry, entry), "$.kv_layouts[0].stored"},
		"stored exponent":       {migratingManifest, layout("1e0", entry, entry), "$.kv_layouts[0].stored"},
		"stored a string":       {migratingManifest, layout(`"0"`, entry, entry), "$.kv_layouts[0].stored"},
		"foreign namespace":     {migratingManifest, layout("0", `{"namespace": "other", "key": "k", "value": 1}`, entry), "$.kv_layouts[0].seed[0].namespace"},
		"empty key":             {migratingManifest, layout("0", `{"namespace": "memo", "key": "", "value": 1}`, entry), "$.kv_layouts[0].seed[0].key"},
		"null seed value":       {migratingManifest, layout("0", `{"namespace": "memo", "key": "k", "value": null}`, entry), "$.kv_layouts[0].seed[0].value"},
		"value missing":         {migratingManifest, layout("0", `{"namespace": "memo", "key": "k"}`, entry), "$.kv_layouts[0].seed[0]"},
		"unknown entry field":   {migratingManifest, layout("0", `{"namespace": "memo", "key": "k", "value": 1, "version": "x"}`, entry), "$.kv_layouts[0].seed[0].version"},
		"nothing wanted":        {migratingManifest, layout("0", entry, ""), "$.kv_layouts[0].want"},
		"want missing":          {migratingManifest, `{"kv_layouts": [{"stored": 0, "seed": []}]}`, "$.kv_layouts[0]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := protocol.ParseManifest([]byte(tc.manifest))
			require.NoError(t, err)
			_, err = ParseInputs([]byte(tc.data), m)
			var ie *InputsError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.path, ie.Path, "%v", err)
		})
	}
}

// FuzzParseKVLayouts feeds the kv_layouts member untrusted text: it is
// refused with a path, or every layout it yields is below the manifest's
// version and in the package's own namespaces.
func FuzzParseKVLayouts(f *testing.F) {
	for _, seed := range []string{
		`{"kv_layouts":[{"stored":0,"seed":[{"namespace":"memo","key":"k","value":{"a":1}}],"want":[{"namespace":"memo.index","key":"k","value":null}]}]}`,
		`{"kv_layouts":[{"stored":1,"seed":[],"want":[{"namespace":"memo","key":"count","value":3}]}]}`,
		`{"kv_layouts":[{"stored":2,"seed":[],"want":[]}]}`,
		`{"kv_layouts":[{"stored":0,"seed":[{"namespace":"memox","key":"k","value":1}],"want":[]}]}`,
	} {
		f.Add([]byte(seed))
	}
	m := migratingManifestValue(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseInputs(data, m)
		if err != nil {
			var ie *InputsError
			if !assert.ErrorAs(t, err, &ie) || ie.Path == "" {
				t.Fatalf("a refusal without a path: %v", err)
			}
			return
		}
		for _, l := range in.KVLayouts {
			assert.True(t, l.Stored >= 0 && l.Stored < m.KVVersion, "stored %d", l.Stored)
			assert.NotEmpty(t, l.Want)
			for _, e := range append(append([]KVSeedEntry{}, l.Seed...), l.Want...) {
				assert.True(t, protocol.Namespace(m.Name, e.Namespace), "namespace %q", e.Namespace)
				assert.True(t, e.absent() || json.Valid(e.Value), "%s", e.Value)
			}
		}
	})
}

// kvCall calls the memKV interceptor as a package's host call would.
func kvCall(t *testing.T, f CallbackInterceptor, method string, params, result any) error {
	t.Helper()
	raw, err := json.Marshal(params)
	require.NoError(t, err)
	answered, res, err := f(context.Background(), method, raw)
	require.True(t, answered, "%s must be answered by the KV", method)
	if err != nil || result == nil {
		return err
	}
	out, merr := json.Marshal(res)
	require.NoError(t, merr)
	require.NoError(t, json.Unmarshal(out, result))
	return nil
}

func TestMemKVServesTheHostsRules(t *testing.T) {
	kv := newMemKV("memo", []KVSeedEntry{
		{Namespace: "memo", Key: "a", Value: json.RawMessage(`1`)},
		{Namespace: "memo", Key: "b", Value: json.RawMessage(`2`)},
		{Namespace: "memo", Key: "c", Value: json.RawMessage(`3`)},
		{Namespace: "memo.index", Key: "a", Value: json.RawMessage(`4`)},
	})
	var wrote []protocol.KVCommitParams
	f := kv.intercept(func(b protocol.KVCommitParams) { wrote = append(wrote, b) })

	answered, _, _ := f(context.Background(), "event.accept", json.RawMessage(`{}`))
	assert.False(t, answered, "what is not KV goes on to the host")

	var got protocol.KVGetResult
	require.NoError(t, kvCall(t, f, "kv.get", protocol.KVGetParams{Namespace: "memo", Key: "a"}, &got))
	assert.True(t, got.Found)
	assert.JSONEq(t, `1`, string(got.Value))
	require.NotEmpty(t, got.Version)
	var none protocol.KVGetResult
	require.NoError(t, kvCall(t, f, "kv.get", protocol.KVGetParams{Namespace: "memo", Key: "zz"}, &none))
	assert.False(t, none.Found)

	// Pages in key order, one namespace, a prefix, after the cursor.
	var page protocol.KVListResult
	require.NoError(t, kvCall(t, f, "kv.list", protocol.KVListParams{Namespace: "memo", Limit: 2}, &page))
	require.Len(t, page.Items, 2)
	assert.Equal(t, []string{"a", "b"}, []string{page.Items[0].Key, page.Items[1].Key})
	assert.Equal(t, "b", page.Next)
	var last protocol.KVListResult
	require.NoError(t, kvCall(t, f, "kv.list", protocol.KVListParams{Namespace: "memo", After: page.Next, Limit: 2}, &last))
	require.Len(t, last.Items, 1)
	assert.Equal(t, "c", last.Items[0].Key)
	assert.Empty(t, last.Next, "the last page names no next")

	// A stale precondition refuses the whole batch.
	stale := protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: "memo", Key: "a", Version: "sha256:stale"}},
		Puts:          []protocol.KVPut{{Namespace: "memo", Key: "d", Value: json.RawMessage(`5`)}},
	}
	assert.ErrorIs(t, kvCall(t, f, "kv.commit", stale, nil), protocol.ErrConflict)
	absent := protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: "memo", Key: "b", Absent: true}},
		Deletes:       []protocol.KVKey{{Namespace: "memo", Key: "c"}},
	}
	assert.ErrorIs(t, kvCall(t, f, "kv.commit", absent, nil), protocol.ErrConflict)
	_, found := kv.value("memo", "d")
	assert.False(t, found, "a refused batch applies nothing")
	_, found = kv.value("memo", "c")
	assert.True(t, found, "a refused batch applies nothing")
	assert.Empty(t, wrote, "a refused batch is no write")

	// A guarded batch applies whole and is seen as a write.
	move := protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: "memo", Key: "a", Version: got.Version}, {Namespace: "memo.index", Key: "n", Absent: true}},
		Puts:          []protocol.KVPut{{Namespace: "memo.index", Key: "n", Value: json.RawMessage(`1`)}},
		Deletes:       []protocol.KVKey{{Namespace: "memo", Key: "a"}},
	}
	require.NoError(t, kvCall(t, f, "kv.commit", move, nil))
	_, found = kv.value("memo", "a")
	assert.False(t, found)
	v, found := kv.value("memo.index", "n")
	assert.True(t, found)
	assert.JSONEq(t, `1`, string(v))
	require.Len(t, wrote, 1)
	_, unguarded := unguardedWrite(wrote[0])
	assert.False(t, unguarded, "every key it writes is guarded")
	k, unguarded := unguardedWrite(protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: "memo", Key: "x", Value: json.RawMessage(`1`)}}})
	assert.True(t, unguarded)
	assert.Equal(t, "x", k.Key)

	// A precondition-only batch writes nothing.
	require.NoError(t, kvCall(t, f, "kv.commit", protocol.KVCommitParams{Preconditions: []protocol.KVPrecondition{{Namespace: "memo", Key: "a", Absent: true}}}, nil))
	assert.Len(t, wrote, 1)

	// Another package's namespace and emissions are refused.
	assert.ErrorIs(t, kvCall(t, f, "kv.get", protocol.KVGetParams{Namespace: "other", Key: "a"}, nil), protocol.ErrUnauthorized)
	assert.ErrorIs(t, kvCall(t, f, "kv.list", protocol.KVListParams{Namespace: "memox"}, nil), protocol.ErrUnauthorized)
	assert.ErrorIs(t, kvCall(t, f, "kv.commit", protocol.KVCommitParams{Puts: []protocol.KVPut{{Namespace: "other", Key: "a", Value: json.RawMessage(`1`)}}}, nil), protocol.ErrUnauthorized)
	assert.ErrorIs(t, kvCall(t, f, "kv.commit", protocol.KVCommitParams{Emissions: []protocol.Emission{{}}}, nil), protocol.ErrInvalid)
}

func TestConfigureAnsweredByWireOrder(t *testing.T) {
	layout := protocol.KVLayout{Stored: 0, Declared: 2}
	line := func(from bool, s string) WireLine { return WireLine{FromExtension: from, Line: []byte(s)} }
	lines := []WireLine{
		line(false, `{"jsonrpc":"2.0","id":7,"method":"configure","params":{"entries":[],"connections":[],"kv":{"stored":2,"declared":2}}}`),
		line(true, `{"jsonrpc":"2.0","id":7,"result":{}}`),
		line(false, `{"jsonrpc":"2.0","id":8,"method":"configure","params":{"entries":[],"connections":[],"kv":{"stored":0,"declared":2}}}`),
		line(true, `{"jsonrpc":"2.0","id":1,"method":"kv.commit","params":{}}`),
	}
	assert.False(t, configureAnswered(lines, 0, layout), "the other configure's answer is not this one's")
	lines = append(lines, line(true, `{"jsonrpc":"2.0","id":8,"result":{}}`))
	assert.True(t, configureAnswered(lines, 0, layout))
	assert.False(t, configureAnswered(lines, 5, layout), "only lines from the run on count")
}
