package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// KVLayoutSeed is an older KV layout of a package, from the author's
// inputs file: the KV as a release at layout Stored left it, and the
// entries the current release's layout holds once it has migrated from
// it. Certification cannot make an old layout up, so it comes from the
// author, who knows what each release wrote (notes' tests seed release
// 1's layout by running release 1; the inputs file writes that KV down).
type KVLayoutSeed struct {
	// Stored is the older layout's version, below the manifest's
	// kv_version: configure carries it as kv.stored.
	Stored int
	// Seed is the KV the older release left.
	Seed []KVSeedEntry
	// Want is what the migrated KV must hold: each entry's value, or its
	// absence for a null value. Entries it does not name are not judged.
	Want []KVSeedEntry
}

// KVSeedEntry is one KV entry of a KVLayoutSeed; a nil or null Value is
// an absent entry.
type KVSeedEntry struct {
	Namespace string
	Key       string
	Value     json.RawMessage
}

// absent reports whether the entry stands for no value.
func (e KVSeedEntry) absent() bool { return len(e.Value) == 0 || string(e.Value) == "null" }

// parseKVLayouts reads the inputs file's kv_layouts: a non-empty array
// of {stored, seed, want}, stored below m's kv_version, every entry in
// one of m's own namespaces.
func parseKVLayouts(p string, n *jnode, m *protocol.Manifest) ([]KVLayoutSeed, error) {
	switch {
	case m.KVVersion == 0:
		return nil, &InputsError{Path: p, Message: "the manifest declares kv_version 0: there is no older KV layout to migrate from"}
	case n.kind != '[':
		return nil, n.want(p, "an array of one or more older KV layouts")
	case len(n.vals) == 0:
		return nil, &InputsError{Path: p, Message: "want one or more entries, not none"}
	}
	var out []KVLayoutSeed
	for i, it := range n.vals {
		q := fmt.Sprintf("%s[%d]", p, i)
		var s KVLayoutSeed
		entries := func(dst *[]KVSeedEntry, nullable bool) func(string, *jnode) error {
			return func(p string, n *jnode) error {
				if n.kind != '[' {
					return n.want(p, "an array of {namespace, key, value} entries")
				}
				for j, e := range n.vals {
					ep := fmt.Sprintf("%s[%d]", p, j)
					var kv KVSeedEntry
					err := e.object(ep, map[string]func(string, *jnode) error{
						"namespace": func(p string, n *jnode) error { return n.str(p, &kv.Namespace) },
						"key":       func(p string, n *jnode) error { return n.str(p, &kv.Key) },
						"value":     func(p string, n *jnode) error { kv.Value = n.raw(); return nil },
					}, []string{"namespace", "key", "value"})
					if err != nil {
						return err
					}
					if !protocol.Namespace(m.Name, kv.Namespace) {
						return &InputsError{Path: ep + ".namespace", Message: fmt.Sprintf("%q is not one of %s's own namespaces", kv.Namespace, m.Name)}
					}
					if kv.Key == "" {
						return &InputsError{Path: ep + ".key", Message: "a key is not empty"}
					}
					if kv.absent() && !nullable {
						return &InputsError{Path: ep + ".value", Message: "a seeded entry has a value (null is for want's absent entries)"}
					}
					*dst = append(*dst, kv)
				}
				return nil
			}
		}
		err := it.object(q, map[string]func(string, *jnode) error{
			"stored": func(p string, n *jnode) error {
				if n.kind != 'n' {
					return n.want(p, "a layout version")
				}
				v, err := fmt.Sscan(n.text, &s.Stored)
				if err != nil || v != 1 || s.Stored < 0 || s.Stored >= m.KVVersion || fmt.Sprint(s.Stored) != n.text {
					return &InputsError{Path: p, Message: fmt.Sprintf("want a whole layout version from 0 to %d, below the manifest's kv_version, not %s", m.KVVersion-1, n.text)}
				}
				return nil
			},
			"seed": entries(&s.Seed, false),
			"want": entries(&s.Want, true),
		}, []string{"stored", "seed", "want"})
		if err != nil {
			return nil, err
		}
		if len(s.Want) == 0 {
			return nil, &InputsError{Path: q + ".want", Message: "want one or more entries the migrated layout holds, not none"}
		}
		out = append(out, s)
	}
	return out, nil
}

// CheckPackageKVMigration migrates each older layout the author seeds
// (InputsFile's kv_layouts) on spare processes whose KV certification
// serves itself, as the host would: configure carries kv.stored below
// kv.declared, and the package must
//
//   - migrate before it answers configure: no write after the answer;
//   - write with precondition-guarded batches (each written key guarded);
//   - leave the layout the author says the current release reads (want);
//   - change nothing when the same migration runs again on a new process,
//     as after a crash before the host recorded the new version;
//   - serve its handler operations on the migrated KV.
//
// A package at kv_version 0 has nothing to migrate (not applicable). Layout
// 0 is a fresh install's empty KV, which certification knows without the
// author: a package at kv_version 1 with no seeds is migrated from it. One
// above 1 without a seeded layout could not be exercised and fails, since
// only its author knows what its older releases left.
func CheckPackageKVMigration(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	if m.KVVersion == 0 {
		return notApplicable("the manifest declares kv_version 0: there is no older KV layout to migrate from")
	}
	var seeds []KVLayoutSeed
	if in := authorInputs(d); in != nil {
		seeds = in.KVLayouts
	}
	if len(seeds) == 0 {
		if m.KVVersion > 1 {
			return fmt.Errorf("could not exercise: the manifest declares kv_version %d, and %s seeds no older layout (kv_layouts) to migrate from", m.KVVersion, InputsFile)
		}
		seeds = []KVLayoutSeed{{Stored: 0}} // a fresh install: nothing to move, nothing to judge but the rules
	}
	var errs []error
	for i, seed := range seeds {
		if err := checkMigrationFrom(ctx, d, seed); err != nil {
			errs = append(errs, fmt.Errorf("kv_layouts[%d], layout %d to %d: %w", i, seed.Stored, m.KVVersion, err))
		}
	}
	return errors.Join(errs...)
}

// migrationRun is what one configure with kv.stored < kv.declared showed.
type migrationRun struct {
	writes []protocol.KVCommitParams // the batches that wrote, in order
	late   []protocol.KVCommitParams // of them, those made once configure had answered
}

func checkMigrationFrom(ctx context.Context, d PackageDriver, seed KVLayoutSeed) error {
	m := d.Manifest()
	kv := newMemKV(m.Name, seed.Seed)
	var errs []error

	first, err := migrateOnce(ctx, d, kv, seed.Stored, nil)
	if err != nil {
		return err
	}
	for _, w := range first.late {
		errs = append(errs, fmt.Errorf("it answered configure before its migration was done: it wrote %s after the answer", describeBatch(w)))
	}
	for _, w := range first.writes {
		if k, ok := unguardedWrite(w); ok {
			errs = append(errs, fmt.Errorf("a migration batch writes %s/%s without a precondition on it; migration batches are precondition-guarded", k.Namespace, k.Key))
			break
		}
	}
	for _, e := range seed.Want {
		got, found := kv.value(e.Namespace, e.Key)
		switch {
		case e.absent() && found:
			errs = append(errs, fmt.Errorf("after the migration %s/%s holds %s; the current layout has no such entry", e.Namespace, e.Key, clip(string(got), 160)))
		case !e.absent() && !found:
			errs = append(errs, fmt.Errorf("after the migration %s/%s is absent; the current layout holds %s there", e.Namespace, e.Key, clip(string(e.Value), 160)))
		case !e.absent() && !sameJSON(got, e.Value):
			errs = append(errs, fmt.Errorf("after the migration %s/%s holds %s, not %s", e.Namespace, e.Key, clip(string(got), 160), clip(string(e.Value), 160)))
		}
	}

	// The host records the new version only once configure succeeded, so
	// a crash before that runs the same migration again on a new process.
	second, err := migrateOnce(ctx, d, kv, seed.Stored, func(p RawPackage) error {
		return readAfterMigration(ctx, d, p)
	})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("running the migration again: %w", err))...)
	}
	if len(second.writes) > 0 {
		errs = append(errs, fmt.Errorf("the migration is not idempotent: run again from layout %d on the layout it left, it wrote %s", seed.Stored, describeBatch(second.writes[0])))
	}
	return errors.Join(errs...)
}

// migrateOnce starts a spare process whose KV calls kv serves, and
// configures it with kv.stored below kv.declared; then runs after, when
// given, on the same process.
func migrateOnce(ctx context.Context, d PackageDriver, kv *memKV, stored int, after func(RawPackage) error) (migrationRun, error) {
	var (
		mu   sync.Mutex
		run  migrationRun
		done bool // the migration and its settling configure answered
	)
	err := withSpare(ctx, d, func(p RawPackage) error {
		if err := p.Call(ctx, "initialize", d.InitializeParams(), &protocol.InitializeResult{}); err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		params := d.ConfigureParams()
		params.KV = protocol.KVLayout{Stored: stored, Declared: d.Manifest().KVVersion}
		from := len(d.Wire())
		restore := p.Intercept(kv.intercept(func(b protocol.KVCommitParams) {
			// A package that migrates first has its batches answered
			// before it can answer configure; one whose answer is on the
			// wire already made this write after answering.
			late := configureAnswered(d.Wire(), from, params.KV)
			mu.Lock()
			defer mu.Unlock()
			if done {
				return // the operations after the migration write for themselves
			}
			run.writes = append(run.writes, b)
			if late {
				run.late = append(run.late, b)
			}
		}))
		defer restore()
		if err := p.Call(ctx, "configure", params, nil); err != nil {
			return fmt.Errorf("configure with kv.stored %d < kv.declared %d: %w", stored, params.KV.Declared, err)
		}
		// The configure the host sends once it recorded the new layout:
		// a package that migrates after answering is seen writing by its
		// answer (a package serving in order writes before it).
		recorded := d.ConfigureParams()
		recorded.KV = protocol.KVLayout{Stored: params.KV.Declared, Declared: params.KV.Declared}
		if err := p.Call(ctx, "configure", recorded, nil); err != nil {
			return fmt.Errorf("configure with the migrated layout, kv.stored %d: %w", params.KV.Declared, err)
		}
		mu.Lock()
		done = true
		mu.Unlock()
		if after != nil {
			if err := after(p); err != nil {
				return err
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	return run, err
}

// configureAnswered reports whether the package's answer to the host's
// configure carrying layout is on the wire after line from.
func configureAnswered(lines []WireLine, from int, layout protocol.KVLayout) bool {
	msgs := decodeWire(lines, from)
	for _, m := range msgs {
		if m.fromExtension || !m.request() || m.Method != "configure" {
			continue
		}
		var p protocol.ConfigureParams
		if json.Unmarshal(m.Params, &p) == nil && p.KV == layout {
			return answerTo(msgs, string(m.ID)) != nil
		}
	}
	return false
}

// readAfterMigration calls each handler operation on the migrated KV,
// through the package's own methods: each must accept one of its inputs.
func readAfterMigration(ctx context.Context, d PackageDriver, p RawPackage) error {
	var errs []error
	for _, o := range d.Manifest().Provides.Operations {
		if o.Kind != protocol.OperationKindHandler {
			continue
		}
		var refusals []string
		for i, in := range operationInputs(d, o) {
			err := p.Call(ctx, "operation.call", protocol.OperationCallParams{Operation: o.Name,
				RequestID: fmt.Sprintf("certify-migrated-%s-%d", o.Name, i), Input: in, Authority: authority(d)}, nil)
			if err == nil {
				refusals = nil
				break
			}
			refusals = append(refusals, fmt.Sprintf("input %s: %s", describeInput(in), clip(err.Error(), 160)))
		}
		if len(refusals) > 0 {
			errs = append(errs, fmt.Errorf("on the migrated layout, operation %s served none of its inputs (%s)", o.Name, strings.Join(refusals, "; ")))
		}
	}
	return errors.Join(errs...)
}

// unguardedWrite is the first key b writes without a precondition on it.
func unguardedWrite(b protocol.KVCommitParams) (protocol.KVKey, bool) {
	guarded := map[protocol.KVKey]bool{}
	for _, c := range b.Preconditions {
		guarded[protocol.KVKey{Namespace: c.Namespace, Key: c.Key}] = true
	}
	for _, p := range b.Puts {
		if k := (protocol.KVKey{Namespace: p.Namespace, Key: p.Key}); !guarded[k] {
			return k, true
		}
	}
	for _, k := range b.Deletes {
		if !guarded[k] {
			return k, true
		}
	}
	return protocol.KVKey{}, false
}

// describeBatch names what a batch writes, cut short.
func describeBatch(b protocol.KVCommitParams) string {
	var parts []string
	for _, p := range b.Puts {
		parts = append(parts, fmt.Sprintf("put %s/%s", p.Namespace, p.Key))
	}
	for _, k := range b.Deletes {
		parts = append(parts, fmt.Sprintf("delete %s/%s", k.Namespace, k.Key))
	}
	return clip(strings.Join(parts, ", "), 240)
}

// memKV is the KV certification serves a migrating package: the author's
// seed, kept in memory, with the host's rules for kv.get, kv.list and
// kv.commit (own namespaces only, preconditions by version, one batch
// applied whole or not at all).
type memKV struct {
	ext string
	mu  sync.Mutex
	kv  map[protocol.KVKey]json.RawMessage
}

func newMemKV(ext string, seed []KVSeedEntry) *memKV {
	k := &memKV{ext: ext, kv: map[protocol.KVKey]json.RawMessage{}}
	for _, e := range seed {
		k.kv[protocol.KVKey{Namespace: e.Namespace, Key: e.Key}] = e.Value
	}
	return k
}

func (k *memKV) value(ns, key string) (json.RawMessage, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.kv[protocol.KVKey{Namespace: ns, Key: key}]
	return v, ok
}

// memKVListLimit is the page size of a kv.list that names none.
const memKVListLimit = 100

// intercept serves the KV methods from k and passes every other call on;
// wrote sees each batch that writes, once it applied.
func (k *memKV) intercept(wrote func(protocol.KVCommitParams)) CallbackInterceptor {
	return func(ctx context.Context, method string, raw json.RawMessage) (bool, any, error) {
		switch method {
		case "kv.get":
			var p protocol.KVGetParams
			if err := k.decode(raw, &p); err != nil {
				return true, nil, err
			}
			if err := k.own(p.Namespace); err != nil {
				return true, nil, err
			}
			v, ok := k.value(p.Namespace, p.Key)
			if !ok {
				return true, protocol.KVGetResult{}, nil
			}
			return true, protocol.KVGetResult{Found: true, Value: v, Version: runtime.KVVersion(v)}, nil
		case "kv.list":
			var p protocol.KVListParams
			if err := k.decode(raw, &p); err != nil {
				return true, nil, err
			}
			if err := k.own(p.Namespace); err != nil {
				return true, nil, err
			}
			return true, k.list(p), nil
		case "kv.commit":
			var p protocol.KVCommitParams
			if err := k.decode(raw, &p); err != nil {
				return true, nil, err
			}
			if err := k.commit(p); err != nil {
				return true, nil, err
			}
			if len(p.Puts)+len(p.Deletes) > 0 {
				wrote(p)
			}
			return true, protocol.KVCommitResult{}, nil
		}
		return false, nil, nil
	}
}

func (k *memKV) decode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return protocol.Errorf(protocol.CodeInvalid, "params: %v", err)
	}
	return nil
}

func (k *memKV) own(ns string) error {
	if !protocol.Namespace(k.ext, ns) {
		return protocol.Errorf(protocol.CodeUnauthorized, "namespace %q is not one of %s's", ns, k.ext)
	}
	return nil
}

func (k *memKV) list(p protocol.KVListParams) protocol.KVListResult {
	k.mu.Lock()
	defer k.mu.Unlock()
	var keys []string
	for key := range k.kv {
		if key.Namespace == p.Namespace && strings.HasPrefix(key.Key, p.Prefix) && key.Key > p.After {
			keys = append(keys, key.Key)
		}
	}
	slices.Sort(keys)
	limit := p.Limit
	if limit <= 0 || limit > memKVListLimit {
		limit = memKVListLimit
	}
	res := protocol.KVListResult{Items: []protocol.KVItem{}}
	for i, key := range keys {
		if i == limit {
			res.Next = keys[i-1]
			break
		}
		v := k.kv[protocol.KVKey{Namespace: p.Namespace, Key: key}]
		res.Items = append(res.Items, protocol.KVItem{Key: key, Value: v, Version: runtime.KVVersion(v)})
	}
	return res
}

func (k *memKV) commit(p protocol.KVCommitParams) error {
	if len(p.Emissions) > 0 {
		return protocol.Errorf(protocol.CodeInvalid, "certification's migration host accepts no emission")
	}
	for _, c := range p.Preconditions {
		if err := k.own(c.Namespace); err != nil {
			return err
		}
	}
	for _, w := range p.Puts {
		if err := k.own(w.Namespace); err != nil {
			return err
		}
	}
	for _, w := range p.Deletes {
		if err := k.own(w.Namespace); err != nil {
			return err
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range p.Preconditions {
		v, found := k.kv[protocol.KVKey{Namespace: c.Namespace, Key: c.Key}]
		switch {
		case c.Absent && found, !c.Absent && (!found || runtime.KVVersion(v) != c.Version):
			return protocol.Errorf(protocol.CodeConflict, "a precondition on %s/%s no longer holds", c.Namespace, c.Key)
		}
	}
	for _, w := range p.Deletes {
		delete(k.kv, w)
	}
	for _, w := range p.Puts {
		k.kv[protocol.KVKey{Namespace: w.Namespace, Key: w.Key}] = w.Value
	}
	return nil
}
