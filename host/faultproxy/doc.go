// Package faultproxy owns the JSON-RPC fault proxy: a line-level
// man-in-the-middle that sits between the host's end of a package's pipes
// and the package's stdin and stdout, and injects scripted faults into the
// stream. It reads lines, not a language: a Go, Python or shell package is
// faulted the same way. Only the host's composition root interposes it
// (serve --test-faults, certify --faults); with no proxy configured the
// host's pipes are untouched.
//
// # Rules
//
// A fault is one rule, a line of words: the fault's name, then key=value
// selectors and parameters, each key at most once, in any order:
//
//	crash method=route.match nth=1
//	delay method=operation.call for=2s
//	drop dir=to-ext nth=3
//	truncate dir=to-host kind=response at=10
//
// Faults:
//
//	delay         hold the message for=DUR, then send it; later messages pass it
//	drop          never send the message
//	duplicate     send the message twice
//	reorder       hold the message and send it after the next one in its direction
//	truncate      send the first at=N bytes of the line (default half of it)
//	corrupt       send the line with its first byte replaced by 0xff: never valid JSON
//	close-stdout  end the extension's stdout: the host reads end of file and nothing
//	              more the extension writes reaches it (the message is not sent)
//	stall         stop reading the extension's stdout, for=DUR or until the rules are
//	              cleared: the host's reader is stalled and the extension's writes back up
//	crash         SIGKILL the package's process group (the message is not sent)
//
// Selectors say which messages a rule counts; every one given must hold:
//
//	dir=to-ext|to-host             the direction (default either)
//	method=NAME                    a request's or notification's method, or for a
//	                               response the method of the request it answers
//	kind=request|response|notification
//	nth=N                          fire at the Nth message the rule counts (from when it
//	                               was added, across restarts of the package), once;
//	                               without nth the rule fires at every message it counts
//
// Parameters: for=DUR (a Go duration, required by delay, optional for stall),
// at=N (truncate only). Anything else (an unknown fault or key, a key given
// twice, a bad value, a parameter its fault does not take) is refused by
// ParseRule with an error naming the word. A message gets at most one fault:
// the first rule, in the order they were added, that fires on it.
//
// Trust nothing: a line that is not JSON, or one longer than MaxInspect,
// is still one message in its direction, of no method and no kind, and is
// forwarded as it came unless a rule that needs neither fires on it.
package faultproxy
