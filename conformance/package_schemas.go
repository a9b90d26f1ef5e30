package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/protocol"
)

// unreadableSchemas are own payload schemas the package must not decide
// on: for each declared base, the version after the one it writes (newer)
// and, when its first listed version is above 1, the one before (retired);
// and an undeclared base in its namespace.
func unreadableSchemas(m *protocol.Manifest) []string {
	var out []string
	for _, s := range m.Provides.Schemas {
		if len(s.Versions) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s.v%d", s.Base, s.Versions[len(s.Versions)-1]+1))
		if first := s.Versions[0]; first > 1 {
			out = append(out, fmt.Sprintf("%s.v%d", s.Base, first-1))
		}
	}
	out = append(out, m.Name+".certify_undeclared.v1")
	return out
}

// relabel is e with its payload labelled schema, under a delivery of its own.
func relabel(e protocol.Event, schema string, n int) protocol.Event {
	e.DeliveryID = fmt.Sprintf("%s-unreadable-%d", e.DeliveryID, n)
	e.ID = protocol.EmittedEventID(e.Source, e.DeliveryID)
	e.Root, e.Schema = e.ID, schema
	return e
}

// CheckPackageSchemasReadable takes each Event a route handler matches
// (certification's, the author's and the handler's samples) and offers it
// again with its payload labelled newer than the package writes, retired
// or undeclared (unreadableSchemas): each must be answered no match, never
// decided on (that the same input gets the same answer is routes/pure's). The author's route Events at an
// older listed version (InputsFile) must be answered, read through their
// upcast, not refused. With no Event any handler matches, there is nothing
// a refusal would show: the check is not applicable.
func CheckPackageSchemasReadable(ctx context.Context, d PackageDriver) error {
	m := d.Manifest()
	if len(m.Provides.Routes) == 0 {
		return notApplicable("the manifest declares no route handler")
	}
	var errs []error
	informative := 0
	for _, r := range m.Provides.Routes {
		match := func(e protocol.Event) (bool, error) {
			var res protocol.RouteMatchResult
			err := d.Call(ctx, "route.match", protocol.RouteMatchParams{Handler: r.Handler, ScopeID: scope(d), Event: e}, &res)
			return err == nil && res.Match, err
		}
		for _, e := range routeEvents(ctx, d, r) {
			if matched, _ := match(e); !matched {
				continue
			}
			for n, schema := range unreadableSchemas(m) {
				status := m.PayloadStatus(schema)
				if status != protocol.Newer && status != protocol.Retired && status != protocol.Undeclared {
					continue
				}
				informative++
				x := relabel(e, schema, n+1)
				matched, err := match(x)
				switch {
				case err != nil && !serving(err):
					errs = append(errs, fmt.Errorf("route %s: route.match of %s with its payload labelled %s (%s): %w", r.Handler, e.DeliveryID, status, schema, err))
				case matched:
					errs = append(errs, fmt.Errorf("route %s: route.match matched %s with its payload labelled %s (%s); a payload the package cannot read is no match, never a decision", r.Handler, e.DeliveryID, status, schema))
				}
			}
		}
		for _, e := range routeInputEvents(d, r.Handler) {
			if m.PayloadStatus(e.Schema) != protocol.Upcast {
				continue
			}
			if _, err := match(e); err != nil {
				errs = append(errs, fmt.Errorf("route %s: the author's %s payload (an older version the package lists) was refused, not read through its upcast: %w", r.Handler, e.Schema, err))
			}
		}
	}
	if len(errs) == 0 && informative == 0 {
		return notApplicable("no route handler matched an Event certification offered (its own, the author's or a sample), so refusing an unreadable twin would show nothing")
	}
	return errors.Join(errs...)
}
