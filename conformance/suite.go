package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// namedCheck is one check of a suite, bound to the driver it runs
// against. skip, when not empty, says why the check does not apply to
// that driver.
type namedCheck struct {
	name string
	skip string
	run  func(ctx context.Context) error
}

// bind turns a suite's table into checks bound to one driver.
func bind[C any](table []C, bound func(C) namedCheck) []namedCheck {
	out := make([]namedCheck, 0, len(table))
	for _, c := range table {
		out = append(out, bound(c))
	}
	return out
}

// checkAll runs every check that applies and returns the failures joined,
// each prefixed with its check's name: the core of every CheckX, usable
// without a testing.T (certification runs it).
func checkAll(ctx context.Context, checks []namedCheck) error {
	var errs []error
	for _, c := range checks {
		if c.skip != "" {
			continue
		}
		if err := c.run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// runAll runs every check as a named subtest of t, skipping those that do
// not apply with their reason.
func runAll(t *testing.T, checks []namedCheck) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			if err := c.run(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
}
