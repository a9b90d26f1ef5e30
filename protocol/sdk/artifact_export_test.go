package sdk

// SetArtifactBeforeSettle makes an ArtifactWriter over a stream call f
// as it starts to wait for the acknowledgement of the chunk in flight (a
// chunk encoded ahead, Commit, Abort), and returns a function that
// restores the default (nothing).
func SetArtifactBeforeSettle(f func()) (restore func()) {
	artifactBeforeSettle = f
	return func() { artifactBeforeSettle = nil }
}
