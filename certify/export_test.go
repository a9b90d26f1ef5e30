package certify

// BreakRunner makes every later Run corrupt each result with sabotage after
// deciding it: the negative control of the honesty checks. restore undoes it.
func BreakRunner(sabotage func(*Result)) (restore func()) {
	testHook = func(r *runner) { r.sabotage = sabotage }
	return func() { testHook = nil }
}

// Coverage is coverage, for its unit test.
var Coverage = coverage
