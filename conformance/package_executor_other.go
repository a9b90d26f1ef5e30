//go:build !unix

package conformance

import "errors"

var errNoProcessGroups = errors.New("certification observes a run's process group only on unix")

func processGroupOf(pid int) (int, error) { return 0, errNoProcessGroups }

func groupRunning(pgid int) (int, error) { return 0, errNoProcessGroups }

func killGroup(pgid int) {}
