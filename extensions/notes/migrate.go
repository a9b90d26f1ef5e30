package notes

import (
	"context"
	"fmt"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
)

// The keys of KV layout 2 in NamespaceIndex.
const (
	countKey       = "count"
	indexKeyPrefix = "note/"
)

func indexKey(noteID string) string { return indexKeyPrefix + noteID }

// noteCount is the count of indexed notes (layout 2).
type noteCount struct {
	Notes int `json:"notes"`
}

// migrate upgrades the KV layout one version at a time. Every step is a
// series of precondition-guarded batches (sdk.Host.Update) that are no-ops
// once applied, so a migration cut short by a crash is simply run again:
// the host records the new version only after configure succeeds.
//
//	0 → 1  move each note record from NamespaceLegacy/<id> to
//	       NamespaceIndex/note/<id>, one atomic batch per note
//	1 → 2  write NamespaceIndex/count, the number of indexed notes
func (x *extension) migrate(ctx context.Context, host *sdk.Host, stored, declared int) error {
	steps := map[int]func(context.Context, *sdk.Host) error{0: moveLegacyRecords, 1: countIndexed}
	for v := stored; v < declared; v++ {
		step, ok := steps[v]
		if !ok {
			return fmt.Errorf("no migration from KV layout %d", v)
		}
		if err := step(ctx, host); err != nil {
			return fmt.Errorf("KV layout %d to %d: %w", v, v+1, err)
		}
	}
	return nil
}

func moveLegacyRecords(ctx context.Context, host *sdk.Host) error {
	after := ""
	for {
		page, err := host.List(ctx, protocol.KVListParams{Namespace: NamespaceLegacy, After: after, Limit: 100})
		if err != nil {
			return err
		}
		for _, item := range page.Items {
			_, err := host.Update(ctx, func(t *sdk.Txn) error {
				value, found, err := t.Get(NamespaceLegacy, item.Key)
				if err != nil || !found {
					return err // moved by an earlier run
				}
				if _, err := t.GetJSON(NamespaceIndex, indexKey(item.Key), new(indexRecord)); err != nil {
					return err
				}
				t.Delete(NamespaceLegacy, item.Key)
				return t.Put(NamespaceIndex, indexKey(item.Key), value)
			})
			if err != nil {
				return fmt.Errorf("moving note record %s: %w", item.Key, err)
			}
		}
		if page.Next == "" || len(page.Items) == 0 {
			return nil
		}
		after = page.Next
	}
}

func countIndexed(ctx context.Context, host *sdk.Host) error {
	n, after := 0, ""
	for {
		page, err := host.List(ctx, protocol.KVListParams{Namespace: NamespaceIndex, Prefix: indexKeyPrefix, After: after, Limit: 100})
		if err != nil {
			return err
		}
		for _, item := range page.Items {
			if strings.HasPrefix(item.Key, indexKeyPrefix) {
				n++
			}
		}
		if page.Next == "" || len(page.Items) == 0 {
			break
		}
		after = page.Next
	}
	_, err := host.Update(ctx, func(t *sdk.Txn) error {
		var count noteCount
		found, err := t.GetJSON(NamespaceIndex, countKey, &count)
		if err != nil || (found && count.Notes == n) {
			return err
		}
		return t.Put(NamespaceIndex, countKey, noteCount{Notes: n})
	})
	return err
}
