package sdk

// SetMaxInflight sets the bound on requests served at once for the
// connections ServeConn starts from now on, and returns a function that
// restores it. Transcripts use a small bound to stay short.
func SetMaxInflight(n int) (restore func()) {
	old := maxInflight
	maxInflight = n
	return func() { maxInflight = old }
}
