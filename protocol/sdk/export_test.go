package sdk

// SetMaxInflight sets the bound on requests served at once for the
// connections ServeConn starts from now on, and returns a function that
// restores it. Transcripts use a small bound to stay short.
func SetMaxInflight(n int) (restore func()) {
	old := maxInflight
	maxInflight = n
	return func() { maxInflight = old }
}

// SetBeforeServe makes ServeConn call f as each request's handler starts,
// before the request is counted or served, and returns a function that
// restores the default (nothing).
func SetBeforeServe(f func(method string)) (restore func()) {
	beforeServe = f
	return func() { beforeServe = nil }
}

// SetAfterServe makes ServeConn call f as each request's handler returns,
// before its answer is written, and returns a function that restores the
// default (nothing).
func SetAfterServe(f func(method string)) (restore func()) {
	afterServe = f
	return func() { afterServe = nil }
}

// SetEagerServing makes the connections ServeConn starts from now on hand
// every request to a goroutine (false), as before requests started on the
// reader, or start them on it (true, the default).
func SetEagerServing(on bool) (restore func()) {
	old := eagerServing
	eagerServing = nil
	if on {
		eagerServing = servedEager
	}
	return func() { eagerServing = old }
}
