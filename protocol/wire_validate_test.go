package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestKVCommitParamsValidate(t *testing.T) {
	ok := protocol.KVCommitParams{
		Preconditions: []protocol.KVPrecondition{{Namespace: "notes", Key: "a", Version: "v1"}, {Namespace: "notes", Key: "b", Absent: true}},
		Puts:          []protocol.KVPut{{Namespace: "notes", Key: "b", Value: raw(`{"x":1}`)}},
		Deletes:       []protocol.KVKey{{Namespace: "notes", Key: "a"}},
		Emissions:     []protocol.Emission{{Source: "notes", DeliveryID: "d", Family: "notes.note", Payload: raw(`{}`)}},
	}
	assert.NoError(t, ok.Validate())
	assert.NoError(t, (&protocol.KVCommitParams{}).Validate(), "an empty batch is valid")

	cases := map[string]struct {
		edit func(p *protocol.KVCommitParams)
		want string
	}{
		"precondition with both":    {func(p *protocol.KVCommitParams) { p.Preconditions[0].Absent = true }, "preconditions[0]: exactly one of version and absent"},
		"precondition with neither": {func(p *protocol.KVCommitParams) { p.Preconditions[1].Absent = false }, "preconditions[1]: exactly one of version and absent"},
		"bad namespace":             {func(p *protocol.KVCommitParams) { p.Puts[0].Namespace = "" }, "puts[0].namespace"},
		"control in namespace":      {func(p *protocol.KVCommitParams) { p.Deletes[0].Namespace = "notes\n" }, "deletes[0].namespace"},
		"empty key":                 {func(p *protocol.KVCommitParams) { p.Preconditions[0].Key = "" }, "preconditions[0].key"},
		"invalid UTF-8 key":         {func(p *protocol.KVCommitParams) { p.Puts[0].Key = "\xff" }, "puts[0].key"},
		"missing value":             {func(p *protocol.KVCommitParams) { p.Puts[0].Value = nil }, "puts[0].value"},
		"invalid value":             {func(p *protocol.KVCommitParams) { p.Puts[0].Value = raw(`{`) }, "puts[0].value"},
		"two values":                {func(p *protocol.KVCommitParams) { p.Puts[0].Value = raw(`1 2`) }, "puts[0].value"},
		"put and delete same key":   {func(p *protocol.KVCommitParams) { p.Deletes[0].Key = "b" }, `deletes[0]: key "b" in namespace "notes" is already written by puts[0]`},
		"emission without source":   {func(p *protocol.KVCommitParams) { p.Emissions[0].Source = "" }, "emissions[0].source"},
		"emission without delivery": {func(p *protocol.KVCommitParams) { p.Emissions[0].DeliveryID = "" }, "emissions[0].delivery_id"},
		"emission without family":   {func(p *protocol.KVCommitParams) { p.Emissions[0].Family = "" }, "emissions[0].family"},
		"emission bad payload":      {func(p *protocol.KVCommitParams) { p.Emissions[0].Payload = raw(`nope`) }, "emissions[0].payload"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := clone(t, ok)
			tc.edit(&p)
			err := p.Validate()
			assert.ErrorIs(t, err, protocol.ErrInvalid)
			if err != nil {
				assert.Contains(t, err.Error(), tc.want)
			}
		})
	}
}

func TestEventAcceptParamsValidate(t *testing.T) {
	ok := protocol.EventAcceptParams{
		Source: "notes/runs", DeliveryID: "d", Family: "notes.note", Parent: "evt_1", Payload: raw(`[1]`),
		Puts: []protocol.KVPut{{Namespace: "notes", Key: "k", Value: raw(`"v"`)}},
	}
	assert.NoError(t, ok.Validate())

	root := ok
	root.Parent = ""
	err := root.Validate()
	assert.ErrorIs(t, err, protocol.ErrInvalid)
	assert.ErrorContains(t, err, "parent is required")

	bad := ok
	bad.Family = ""
	assert.ErrorContains(t, bad.Validate(), "event.family is required")

	dup := ok
	dup.Deletes = []protocol.KVKey{{Namespace: "notes", Key: "k"}}
	assert.ErrorContains(t, dup.Validate(), "already written by puts[0]")
}

func FuzzKVCommitParams(f *testing.F) {
	f.Add(`{"preconditions":[{"namespace":"notes","key":"a","version":"v1"}],"puts":[{"namespace":"notes","key":"b","value":true}]}`)
	f.Add(`{"emissions":[{"source":"notes","delivery_id":"d","family":"notes.note","payload":{}}]}`)
	f.Add(`{"puts":[{"namespace":"notes\u0000","key":"","value":null}],"deletes":[{"namespace":"notes","key":"b"}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		var p protocol.KVCommitParams
		if json.Unmarshal([]byte(data), &p) != nil {
			return
		}
		if err := p.Validate(); err != nil {
			if protocol.CodeOf(err) != protocol.CodeInvalid {
				t.Fatalf("refusal %v is not coded invalid", err)
			}
			return
		}
		// A valid batch names valid namespaces and valid JSON values only.
		for _, put := range p.Puts {
			if protocol.ValidNamespace(put.Namespace) != nil || !json.Valid(put.Value) {
				t.Fatalf("accepted put %+v", put)
			}
		}
		for _, c := range p.Preconditions {
			if (c.Version == "") == !c.Absent {
				t.Fatalf("accepted precondition %+v", c)
			}
		}
	})
}

// clone deep-copies a value through JSON.
func clone[T any](t *testing.T, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
