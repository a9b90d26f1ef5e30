package sdk

// SetArtifactBeforeSettle makes an ArtifactWriter over a stream call f
// once it has encoded a chunk and before it waits for the acknowledgement
// of the chunk in flight, and returns a function that restores the
// default (nothing).
func SetArtifactBeforeSettle(f func()) (restore func()) {
	artifactBeforeSettle = f
	return func() { artifactBeforeSettle = nil }
}
