package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// IngressCheckTimeout bounds each ingress check.
var IngressCheckTimeout = 2 * time.Minute

// IngressItem is one item of a fixture upstream: the suite decides what
// the upstream holds, and a conforming source reports each item under its
// ID and Version.
type IngressItem struct {
	ID      string
	Version string
	Body    string
}

// IngressDriver makes sources over fixture upstreams.
type IngressDriver struct {
	// Name is the source's name: its envelopes' Source is Name or
	// Name/….
	Name string
	// NewSource returns a source whose upstream holds exactly items.
	NewSource func(ctx context.Context, items []IngressItem) (runtime.IngressSource, error)
	// Deliver, optional, encodes a push delivery announcing items, as the
	// source's transport would carry it. Without it the push checks are
	// skipped.
	Deliver func(items []IngressItem) runtime.Delivery
	// NewStore opens a fresh, empty store for the checks that run the
	// engine over the source. The suite closes it.
	NewStore func() (runtime.Store, error)
	// PushOnly marks a source without reconcile: the scan checks are
	// skipped.
	PushOnly bool
}

type ingressCheck struct {
	name string
	scan bool // needs reconcile
	run  func(ctx context.Context, d IngressDriver) error
}

var ingressChecks = []ingressCheck{
	{"scan_complete", true, checkScanComplete},
	{"scan_stable_identity", true, checkScanStableIdentity},
	{"version_mints_identity", true, checkVersionMintsIdentity},
	{"engine_reconcile", true, checkEngineReconcile},
	{"engine_partial_scan", true, checkEnginePartialScan},
	{"engine_identity_conflict", true, checkEngineIdentityConflict},
	{"push_durable", false, checkPushDurable},
	{"engine_routes_no_foreign_work", false, checkEngineRoutesNoForeignWork},
}

// CheckIngress runs every ingress check and returns the failures joined,
// each prefixed with its check's name.
func CheckIngress(ctx context.Context, d IngressDriver) error {
	return checkAll(ctx, ingressSuite(d))
}

// RunIngress runs every ingress check as a named subtest.
func RunIngress(t *testing.T, d IngressDriver) {
	t.Helper()
	runAll(t, ingressSuite(d))
}

// ingressSuite binds the checks to d, each under IngressCheckTimeout; a
// push-only source skips the checks that need reconcile.
func ingressSuite(d IngressDriver) []namedCheck {
	return bind(ingressChecks, func(c ingressCheck) namedCheck {
		nc := namedCheck{name: c.name, run: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, IngressCheckTimeout)
			defer cancel()
			return c.run(ctx, d)
		}}
		if c.scan && d.PushOnly {
			nc.skip = "push-only source"
		}
		return nc
	})
}

func fixture(n int) []IngressItem {
	var items []IngressItem
	for i := range n {
		items = append(items, IngressItem{ID: fmt.Sprintf("item-%d", i), Version: "v1", Body: fmt.Sprintf("body %d", i)})
	}
	return items
}

// scanPage is the page limit the suite scans with, small enough that a
// fixture spans several pages.
const scanPage = 2

// maxScanPages bounds a scan, so a source that never completes fails.
const maxScanPages = 100

// scan pages through the source's items directly and checks the paging
// rules: no page over the limit, Complete only on the last page.
func scan(ctx context.Context, src runtime.IngressSource) ([]runtime.Observation, error) {
	var all []runtime.Observation
	cursor := ""
	for page := 1; page <= maxScanPages; page++ {
		p, err := src.Reconcile(ctx, runtime.ReconcileRequest{Cursor: cursor, Limit: scanPage})
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", page, err)
		}
		if len(p.Observations) > scanPage {
			return nil, fmt.Errorf("page %d has %d observations, over the limit of %d", page, len(p.Observations), scanPage)
		}
		all = append(all, p.Observations...)
		if p.Complete {
			return all, nil
		}
		if p.Next == "" {
			return nil, fmt.Errorf("page %d is neither complete nor continued", page)
		}
		cursor = p.Next
	}
	return nil, fmt.Errorf("no complete page in %d pages", maxScanPages)
}

func checkScanComplete(ctx context.Context, d IngressDriver) error {
	items := fixture(5)
	src, err := d.NewSource(ctx, items)
	if err != nil {
		return err
	}
	obs, err := scan(ctx, src)
	if err != nil {
		return err
	}
	seen := map[string]string{}
	var errs []error
	for _, o := range obs {
		if _, dup := seen[o.Item]; dup {
			errs = append(errs, fmt.Errorf("item %q observed twice in one scan", o.Item))
		}
		seen[o.Item] = o.Version
	}
	for _, it := range items {
		v, ok := seen[it.ID]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("a complete scan missed item %q", it.ID))
		case v != it.Version:
			errs = append(errs, fmt.Errorf("item %q observed at version %q, the upstream holds %q", it.ID, v, it.Version))
		}
		delete(seen, it.ID)
	}
	for item := range seen {
		errs = append(errs, fmt.Errorf("observed item %q the upstream does not hold", item))
	}
	return errors.Join(errs...)
}

type identity struct{ item, version string }

type observed struct {
	delivery  string
	signature string
}

func identities(ctx context.Context, src runtime.IngressSource) (map[identity]observed, error) {
	obs, err := scan(ctx, src)
	if err != nil {
		return nil, err
	}
	out := map[identity]observed{}
	for _, o := range obs {
		sig, err := runtime.Signature(o.Envelope)
		if err != nil {
			return nil, fmt.Errorf("item %q: %w", o.Item, err)
		}
		out[identity{o.Item, o.Version}] = observed{o.Envelope.DeliveryID, sig}
	}
	return out, nil
}

func checkScanStableIdentity(ctx context.Context, d IngressDriver) error {
	items := fixture(3)
	src, err := d.NewSource(ctx, items)
	if err != nil {
		return err
	}
	first, err := identities(ctx, src)
	if err != nil {
		return err
	}
	second, err := identities(ctx, src)
	if err != nil {
		return err
	}
	var errs []error
	for id, a := range first {
		b, ok := second[id]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("item %q version %q vanished between two scans of an unchanged upstream", id.item, id.version))
		case a.delivery != b.delivery:
			errs = append(errs, fmt.Errorf("item %q version %q changed delivery ID from %q to %q", id.item, id.version, a.delivery, b.delivery))
		case a.signature != b.signature:
			errs = append(errs, fmt.Errorf("item %q version %q changed content under a stable identity", id.item, id.version))
		}
	}
	return errors.Join(errs...)
}

func checkVersionMintsIdentity(ctx context.Context, d IngressDriver) error {
	items := fixture(2)
	src, err := d.NewSource(ctx, items)
	if err != nil {
		return err
	}
	before, err := identities(ctx, src)
	if err != nil {
		return err
	}
	changed := slices.Clone(items)
	changed[0].Version, changed[0].Body = "v2", "changed body"
	src2, err := d.NewSource(ctx, changed)
	if err != nil {
		return err
	}
	after, err := identities(ctx, src2)
	if err != nil {
		return err
	}
	old, ok1 := before[identity{items[0].ID, "v1"}]
	neu, ok2 := after[identity{items[0].ID, "v2"}]
	if !ok1 || !ok2 {
		return fmt.Errorf("item %q not observed at v1 then v2", items[0].ID)
	}
	if old.delivery == neu.delivery {
		return fmt.Errorf("item %q kept delivery ID %q across a new version: the engine would see an identity conflict", items[0].ID, old.delivery)
	}
	return nil
}

// ingressScope is the scope the engine checks deliver the source into.
const ingressScope = "conformance"

// withEngine runs f on an engine over a fresh store, reading a source of
// items that f may swap for another upstream (sw) mid-check.
func withEngine(ctx context.Context, d IngressDriver, items []IngressItem, f func(e *runtime.Engine, s runtime.Store, sw *swappable) error) error {
	return withRoutedEngine(ctx, d, items, nil, f)
}

// withRoutedEngine is withEngine with handler, when set, as the one route
// of the source's scope.
func withRoutedEngine(ctx context.Context, d IngressDriver, items []IngressItem, handler runtime.RouteHandler, f func(e *runtime.Engine, s runtime.Store, sw *swappable) error) (err error) {
	src, err := d.NewSource(ctx, items)
	if err != nil {
		return err
	}
	s, err := d.NewStore()
	if err != nil {
		return fmt.Errorf("opening a store: %w", err)
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	sw := &swappable{src}
	cfg := runtime.Config{Store: s, Sources: map[string]runtime.Source{d.Name: {ScopeID: ingressScope, Ingress: sw, PageLimit: scanPage}}}
	if handler != nil {
		cfg.Handlers = map[string]runtime.RouteHandler{suiteRouteHandler: handler}
		cfg.Routes = map[string][]runtime.Route{ingressScope: {{Handler: suiteRouteHandler, Kind: "conformance-item"}}}
	}
	e, err := runtime.New(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	return f(e, s, sw)
}

// swappable lets a check change the upstream under one engine.
type swappable struct{ runtime.IngressSource }

// scanned runs a first, complete scan and returns the checkpoint it left.
func scanned(ctx context.Context, e *runtime.Engine, source string) (runtime.ReconcileCheckpoint, error) {
	if _, err := e.Reconcile(ctx, source); err != nil {
		return runtime.ReconcileCheckpoint{}, fmt.Errorf("first scan: %w", err)
	}
	return e.Checkpoint(ctx, source)
}

// latestSequence is the store's last accepted sequence.
func latestSequence(ctx context.Context, s runtime.Store) (n int64, err error) {
	err = s.View(ctx, func(r runtime.ReadTx) error {
		n, err = r.LatestSequence()
		return err
	})
	return n, err
}

func checkEngineReconcile(ctx context.Context, d IngressDriver) error {
	items := fixture(5)
	return withEngine(ctx, d, items, func(e *runtime.Engine, s runtime.Store, sw *swappable) error {
		rep, err := e.Reconcile(ctx, d.Name)
		if err != nil {
			return fmt.Errorf("first scan: %w", err)
		}
		if len(rep.Accepted) != len(items) {
			return fmt.Errorf("first scan accepted %d events, want %d", len(rep.Accepted), len(items))
		}
		rep, err = e.Reconcile(ctx, d.Name)
		if err != nil {
			return fmt.Errorf("rescan: %w", err)
		}
		if len(rep.Accepted) != 0 {
			return fmt.Errorf("a rescan of an unchanged upstream accepted %d events", len(rep.Accepted))
		}
		fewer, err := d.NewSource(ctx, items[1:])
		if err != nil {
			return err
		}
		sw.IngressSource = fewer
		rep, err = e.Reconcile(ctx, d.Name)
		if err != nil {
			return fmt.Errorf("scan after a removal: %w", err)
		}
		if !slices.Equal(rep.Absent, []string{items[0].ID}) {
			return fmt.Errorf("after removing %q the scan inferred absent %q", items[0].ID, rep.Absent)
		}
		return nil
	})
}

// failingPages fails every page after the first of each scan.
type failingPages struct{ runtime.IngressSource }

var errPageLost = errors.New("conformance: page lost")

func (f failingPages) Reconcile(ctx context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	if req.Cursor != "" {
		return runtime.ReconcilePage{}, errPageLost
	}
	return f.IngressSource.Reconcile(ctx, req)
}

func checkEnginePartialScan(ctx context.Context, d IngressDriver) error {
	items := fixture(5)
	return withEngine(ctx, d, items, func(e *runtime.Engine, s runtime.Store, sw *swappable) error {
		cp, err := scanned(ctx, e, d.Name)
		if err != nil {
			return err
		}
		fewer, err := d.NewSource(ctx, items[2:])
		if err != nil {
			return err
		}
		sw.IngressSource = failingPages{fewer}
		rep, err := e.Reconcile(ctx, d.Name)
		if !errors.Is(err, errPageLost) {
			return fmt.Errorf("a scan whose second page fails: got %v, want the page's error", err)
		}
		if rep.Complete || len(rep.Absent) > 0 {
			return fmt.Errorf("a partial scan reported complete=%v absent=%q", rep.Complete, rep.Absent)
		}
		after, err := e.Checkpoint(ctx, d.Name)
		if err != nil {
			return err
		}
		if after != cp {
			return fmt.Errorf("a partial scan moved the checkpoint from %+v to %+v", cp, after)
		}
		snap, err := e.Snapshot(ctx, d.Name)
		if err != nil {
			return err
		}
		if len(snap) != len(items) {
			return fmt.Errorf("a partial scan changed the snapshot to %d items, want %d", len(snap), len(items))
		}
		return nil
	})
}

// rewritten rewrites every observation's content under its identity.
type rewritten struct{ runtime.IngressSource }

func (r rewritten) Reconcile(ctx context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	p, err := r.IngressSource.Reconcile(ctx, req)
	for i := range p.Observations {
		p.Observations[i].Envelope.Type += ".rewritten"
	}
	return p, err
}

func checkEngineIdentityConflict(ctx context.Context, d IngressDriver) error {
	return withEngine(ctx, d, fixture(3), func(e *runtime.Engine, s runtime.Store, sw *swappable) error {
		cp, err := scanned(ctx, e, d.Name)
		if err != nil {
			return err
		}
		before, err := latestSequence(ctx, s)
		if err != nil {
			return err
		}
		sw.IngressSource = rewritten{sw.IngressSource}
		if _, err := e.Reconcile(ctx, d.Name); !errors.Is(err, runtime.ErrConflict) {
			return fmt.Errorf("a scan rewriting content under stable identities: got %v, want conflict", err)
		}
		after, err := latestSequence(ctx, s)
		if err != nil {
			return err
		}
		if after != before {
			return fmt.Errorf("a conflicting scan accepted %d events", after-before)
		}
		if now, err := e.Checkpoint(ctx, d.Name); err != nil || now != cp {
			return fmt.Errorf("a conflicting scan moved the checkpoint (%v)", err)
		}
		return nil
	})
}

func checkPushDurable(ctx context.Context, d IngressDriver) error {
	if d.Deliver == nil {
		return nil
	}
	items := fixture(2)
	return withEngine(ctx, d, nil, func(e *runtime.Engine, s runtime.Store, _ *swappable) error {
		evs, err := e.Push(ctx, d.Name, d.Deliver(items))
		if err != nil {
			return fmt.Errorf("push: %w", err)
		}
		if len(evs) != len(items) {
			return fmt.Errorf("push of %d items accepted %d events", len(items), len(evs))
		}
		// Push returned: the Events are durable and visible to any reader.
		err = s.View(ctx, func(r runtime.ReadTx) error {
			for _, ev := range evs {
				if _, err := r.Event(ev.ID); err != nil {
					return fmt.Errorf("event %s not readable after push returned: %w", ev.ID, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		again, err := e.Push(ctx, d.Name, d.Deliver(items))
		if err != nil {
			return fmt.Errorf("redelivery: %w", err)
		}
		for i := range again {
			if i < len(evs) && again[i].ID != evs[i].ID {
				return fmt.Errorf("redelivery named event %s, first delivery %s", again[i].ID, evs[i].ID)
			}
		}
		n, err := latestSequence(ctx, s)
		if err == nil && n != int64(len(items)) {
			err = fmt.Errorf("after a redelivery the log holds %d events, want %d", n, len(items))
		}
		return err
	})
}

// namingWorks makes every envelope of the source name works.
type namingWorks struct {
	runtime.IngressSource
	works []string
}

func (n namingWorks) Push(ctx context.Context, d runtime.Delivery) ([]runtime.Envelope, error) {
	envs, err := n.IngressSource.Push(ctx, d)
	for i := range envs {
		envs[i].Works = append(envs[i].Works, n.works...)
	}
	return envs, err
}

func (n namingWorks) Reconcile(ctx context.Context, req runtime.ReconcileRequest) (runtime.ReconcilePage, error) {
	p, err := n.IngressSource.Reconcile(ctx, req)
	for i := range p.Observations {
		p.Observations[i].Envelope.Works = append(p.Observations[i].Envelope.Works, n.works...)
	}
	return p, err
}

// workOffers is a route handler that takes every Event, correlating it by
// the key of a Work of another scope, and records the Work it is offered.
type workOffers struct {
	mu      sync.Mutex
	key     string
	offered map[string]*runtime.Work // by Event ID
}

func (o *workOffers) Match(_ context.Context, in runtime.RouteInput) (runtime.RouteDecision, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.offered[in.Event.ID] = in.Work
	return runtime.RouteDecision{Match: true, Reason: "the suite takes every Event", CorrelationKeys: []string{o.key}}, nil
}

// checkEngineRoutesNoForeignWork: the source's Events, each naming a Work
// of another scope (first, by ID) and one of the source's own scope, are
// offered to the scope's route with the Work of their own scope only, and
// a match on the other Work's correlation key never attaches to it.
func checkEngineRoutesNoForeignWork(ctx context.Context, d IngressDriver) error {
	const foreign, own = "wk-a-elsewhere", "wk-b-here"
	offers := &workOffers{key: "key:" + foreign, offered: map[string]*runtime.Work{}}
	return withRoutedEngine(ctx, d, fixture(2), offers, func(e *runtime.Engine, s runtime.Store, sw *swappable) error {
		err := s.Transact(ctx, func(tx runtime.Tx) error {
			for _, w := range []runtime.Work{
				{ID: foreign, ScopeID: ingressScope + "-other", Kind: "conformance-item", State: runtime.WorkPending, CorrelationKeys: []string{offers.key}},
				{ID: own, ScopeID: ingressScope, Kind: "conformance-item", State: runtime.WorkPending},
			} {
				if _, err := tx.PutWork(w); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		sw.IngressSource = namingWorks{sw.IngressSource, []string{foreign, own}}
		var evs []runtime.Event
		if d.Deliver != nil {
			evs, err = e.Push(ctx, d.Name, d.Deliver(fixture(2)))
		} else {
			var rep runtime.ReconcileReport
			rep, err = e.Reconcile(ctx, d.Name)
			evs = rep.Accepted
		}
		if err != nil {
			return fmt.Errorf("accepting the source's Events: %w", err)
		}
		if len(evs) == 0 {
			return errors.New("could not exercise: the source gave no Event")
		}
		for {
			n, err := e.RoutePending(ctx)
			if err != nil {
				return fmt.Errorf("routing: %w", err)
			}
			if n == 0 {
				break
			}
		}
		var errs []error
		for _, ev := range evs {
			offers.mu.Lock()
			w, ok := offers.offered[ev.ID]
			offers.mu.Unlock()
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("event %s was never offered to the scope's route", ev.ID))
			case w == nil || w.ID != own:
				errs = append(errs, fmt.Errorf("event %s of %s naming %s and %s was offered %v, want %s", ev.ID, ingressScope, foreign, own, workID(w), own))
			}
			rec, err := e.RouteRecordOf(ctx, ev.ID)
			if err != nil {
				errs = append(errs, err)
			} else if rec.WorkID == foreign {
				errs = append(errs, fmt.Errorf("event %s of %s was attached to %s of another scope", ev.ID, ingressScope, foreign))
			}
		}
		return errors.Join(errs...)
	})
}

func workID(w *runtime.Work) string {
	if w == nil {
		return "no Work"
	}
	return w.ID + " of " + w.ScopeID
}
