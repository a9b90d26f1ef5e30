//go:build race

package host

// raceBuild passes GORACE on, so a test's race settings reach the packages
// it starts.
const raceBuild = true
