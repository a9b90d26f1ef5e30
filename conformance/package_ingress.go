package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/protocol"
)

// ScanPages bounds the pages one certification scan reads.
const ScanPages = 50

// scannedItem is one item as a scan observed it.
type scannedItem struct {
	version  string
	delivery string // the Event's source and delivery ID
}

// reconcileTargets are the sources the package registered for
// reconciliation at its last configure, each with the ingress type whose
// entry registered it (the first ingress type when that is not known).
func reconcileTargets(d PackageDriver) (out []protocol.IngressReconcileParams) {
	var types []string
	for _, x := range d.Manifest().Provides.Extensions {
		if x.Ingress {
			types = append(types, x.Type)
		}
	}
	if len(types) == 0 {
		return nil
	}
	for _, s := range registeredSources(d) {
		if !s.Reconcile {
			continue
		}
		typ := types[0]
		for _, t := range types {
			if strings.HasPrefix(s.Name, t) {
				typ = t
			}
		}
		scopeID := s.ScopeID
		if scopeID == "" {
			scopeID = scope(d)
		}
		out = append(out, protocol.IngressReconcileParams{Type: typ, Source: s.Name, ScopeID: scopeID, EntryID: "certify-" + typ})
	}
	return out
}

// scanSource pages through one source one item a page, so a package's paging is
// exercised with any two items. A page over the bound, or one that names
// a next page yet claims the scan complete, is a failure.
func scanSource(ctx context.Context, d PackageDriver, p protocol.IngressReconcileParams) (map[string]scannedItem, error) {
	items := map[string]scannedItem{}
	seen := map[string]bool{}
	p.MaxItems, p.Cursor = 1, ""
	for range ScanPages {
		var page protocol.IngressReconcileResult
		if err := d.Call(ctx, "ingress.reconcile", p, &page); err != nil {
			return items, fmt.Errorf("ingress.reconcile of %s: %w", p.Source, err)
		}
		if len(page.Observations) > p.MaxItems {
			return items, fmt.Errorf("ingress.reconcile of %s answered %d observations to a page of at most %d", p.Source, len(page.Observations), p.MaxItems)
		}
		if page.Next != "" && page.Complete {
			return items, fmt.Errorf("ingress.reconcile of %s answered a page with a next page (%q) and claimed the scan complete; a partial scan must say it is partial", p.Source, clip(page.Next, 60))
		}
		for _, o := range page.Observations {
			items[o.Item] = scannedItem{version: o.Version, delivery: o.Event.Source + " " + o.Event.DeliveryID}
		}
		if page.Next == "" {
			return items, nil
		}
		if seen[page.Next] {
			return items, fmt.Errorf("ingress.reconcile of %s named next page %q twice: the scan never ends", p.Source, clip(page.Next, 60))
		}
		seen[page.Next] = true
		p.Cursor = page.Next
	}
	return items, fmt.Errorf("ingress.reconcile of %s had more than %d pages of one item", p.Source, ScanPages)
}

// CheckPackageIngressScan exercises every declared surface and pushes the
// deliveries certification has for each ingress type (so a source has
// items; again, under fresh IDs, while a source has fewer than two, so a
// page of one names a next page), then scans each source registered
// for reconciliation twice, page by page, with nothing changed between:
// each item must keep its (item, version) and its Event's delivery
// identity, the second scan must see the items the first did, and no page
// may claim a partial scan complete.
func CheckPackageIngressScan(ctx context.Context, d PackageDriver) error {
	targets := reconcileTargets(d)
	if len(targets) == 0 {
		return notApplicable("the package registered no source for reconciliation at configure")
	}
	// Seed the sources: every declared surface once (a handler may write
	// what a scan reads), then the deliveries.
	if err := exercise(ctx, d); err != nil {
		return err
	}
	pushDeliveries(ctx, d, targets, "")
	// A source needs two items for a page of one to name a next page, so
	// the scan's paging is checked: seed a second round of each handler
	// operation (fresh request IDs, so an idempotent package makes new
	// effects) and of the deliveries (fresh delivery IDs) while any source
	// has fewer.
	for round := 1; round <= scanSeedRounds && fewerThanTwo(ctx, d, targets); round++ {
		seedScan(ctx, d, targets, round)
	}
	var errs []error
	observed := 0
	for _, t := range targets {
		first, err := scanSource(ctx, d, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		second, err := scanSource(ctx, d, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		observed += len(first)
		for _, item := range slices.Sorted(maps.Keys(first)) {
			a, b := first[item], second[item]
			switch {
			case !hasItem(second, item):
				errs = append(errs, fmt.Errorf("source %s: item %q, unchanged, was not seen by the second scan", t.Source, clip(item, 80)))
			case a.version != b.version:
				errs = append(errs, fmt.Errorf("source %s: item %q, unchanged, changed version between scans: %q, then %q", t.Source, clip(item, 80), clip(a.version, 80), clip(b.version, 80)))
			case a.delivery != b.delivery:
				errs = append(errs, fmt.Errorf("source %s: item %q, unchanged, changed its Event's delivery identity between scans: %q, then %q", t.Source, clip(item, 80), clip(a.delivery, 120), clip(b.delivery, 120)))
			}
		}
		for item := range second {
			if !hasItem(first, item) {
				errs = append(errs, fmt.Errorf("source %s: item %q appeared in the second scan with nothing changed", t.Source, clip(item, 80)))
			}
		}
	}
	if len(errs) == 0 && observed == 0 {
		return notApplicable("no scan observed an item, so there was nothing to compare (give deliveries the package accepts under ingress in %s)", InputsFile)
	}
	return errors.Join(errs...)
}

// scanSeedRounds bounds the extra rounds that seed a source to two items.
const scanSeedRounds = 2

// pushDeliveries pushes the deliveries certification has for each ingress
// type to every source of that type, their IDs suffixed with suffix.
func pushDeliveries(ctx context.Context, d PackageDriver, targets []protocol.IngressReconcileParams, suffix string) {
	for _, x := range d.Manifest().Provides.Extensions {
		if !x.Ingress {
			continue
		}
		for _, del := range deliveries(d, x.Type) {
			del.ID += suffix
			for _, t := range targets {
				if t.Type == x.Type && ctx.Err() == nil {
					_ = d.Call(ctx, "ingress.push", protocol.IngressPushParams{Type: x.Type, Source: t.Source, ScopeID: t.ScopeID, Delivery: del}, nil)
				}
			}
		}
	}
}

// seedScan makes one more round of what can add an item to a source: each
// handler operation's inputs under fresh request IDs, and the deliveries
// under fresh delivery IDs.
func seedScan(ctx context.Context, d PackageDriver, targets []protocol.IngressReconcileParams, round int) {
	for _, o := range d.Manifest().Provides.Operations {
		if o.Kind != protocol.OperationKindHandler {
			continue
		}
		for i, in := range operationInputs(d, o) {
			if ctx.Err() != nil {
				return
			}
			method, params := operationRequest(d, o, fmt.Sprintf("certify-scan-%d-%s-%d", round, o.Name, i), in)
			_ = d.Call(ctx, method, params, nil)
		}
	}
	pushDeliveries(ctx, d, targets, fmt.Sprintf("-scan-%d", round))
}

// fewerThanTwo says whether some source's first page, at the package's
// own page size, holds fewer than two items. Its errors only ask for more
// seeding: the scans that decide come after.
func fewerThanTwo(ctx context.Context, d PackageDriver, targets []protocol.IngressReconcileParams) bool {
	for _, t := range targets {
		t.MaxItems, t.Cursor = 0, ""
		var page protocol.IngressReconcileResult
		if err := d.Call(ctx, "ingress.reconcile", t, &page); err != nil || len(page.Observations) < 2 {
			return true
		}
	}
	return false
}

func hasItem(m map[string]scannedItem, k string) bool {
	_, ok := m[k]
	return ok
}
