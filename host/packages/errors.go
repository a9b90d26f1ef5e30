package packages

import "errors"

// Code is a stable name of a packaging refusal, as `--json` reports it and
// scripts match it.
type Code string

// The refusals, one code per sentinel (codeTable).
var (
	// ErrInvalidSource: SOURCE is neither a package directory nor a
	// .tar.gz of one, or its manifest is invalid.
	ErrInvalidSource = errors.New("not a valid package")
	// ErrUnsafeArchive: the archive or directory holds what a package may
	// not: an absolute path, "..", a link out of it, a device …
	ErrUnsafeArchive = errors.New("unsafe package contents")
	// ErrTooLarge: the package is over MaxPackageBytes or
	// MaxPackageEntries.
	ErrTooLarge = errors.New("package too large")
	// ErrConflict: the package's names clash with an installed or bundled
	// package's, or the host's.
	ErrConflict = errors.New("conflicting package")
	// ErrInstalled: install of a name already installed (use update).
	ErrInstalled = errors.New("already installed")
	// ErrNotInstalled: update, rollback or remove of a name not installed.
	ErrNotInstalled = errors.New("not installed")
	// ErrNoPrevious: rollback with no previous release kept.
	ErrNoPrevious = errors.New("no previous release")
	// ErrKVDowngrade: the release's kv_version is older than the KV layout
	// the store records for the package.
	ErrKVDowngrade = errors.New("kv_downgrade")
	// ErrInUse: remove of a package the configuration uses.
	ErrInUse = errors.New("package in use")
	// ErrNoConsent: the operator did not consent (or could not be asked).
	ErrNoConsent = errors.New("no consent")
	// ErrBusy: another packaging command holds the install tree.
	ErrBusy = errors.New("another packaging command is running")
)

var codeTable = []struct {
	code Code
	err  error
}{
	{"invalid_package", ErrInvalidSource},
	{"unsafe_archive", ErrUnsafeArchive},
	{"too_large", ErrTooLarge},
	{"conflict", ErrConflict},
	{"already_installed", ErrInstalled},
	{"not_installed", ErrNotInstalled},
	{"no_previous_release", ErrNoPrevious},
	{"kv_downgrade", ErrKVDowngrade},
	{"in_use", ErrInUse},
	{"no_consent", ErrNoConsent},
	{"busy", ErrBusy},
}

// CodeOf is the code of the refusal err wraps, "failed" for any other
// error.
func CodeOf(err error) Code {
	for _, row := range codeTable {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	return "failed"
}

// Codes lists every code, in the table's order.
func Codes() []Code {
	out := make([]Code, len(codeTable))
	for i, row := range codeTable {
		out[i] = row.code
	}
	return out
}
