package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// RulePassEnvReserved is the spec's pass_env_reserved: a pass_env grant
// names no variable of the toolbelt (OS_*) or of Open Conduit itself
// (OPEN_CONDUIT_*), so no package is handed the host's own settings.
const RulePassEnvReserved = "pass_env_reserved"

// ReservedEnvPrefixes are the prefixes of the variables no pass_env may
// grant.
func ReservedEnvPrefixes() []string { return []string{"OS_", "OPEN_CONDUIT_"} }

// ReservedEnv reports whether the variable name is one no pass_env may
// grant (ReservedEnvPrefixes).
func ReservedEnv(name string) bool {
	for _, p := range ReservedEnvPrefixes() {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// SettingError is one refusal of an operator's setting, such as a
// package's pass_env: the rule it breaks, the JSON path of the offending
// value relative to the setting ("pass_env[1]"; a caller prefixes where
// the setting sits in its document) and a message. It matches ErrInvalid.
type SettingError struct {
	Rule    string
	Path    string
	Message string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%s: %s [%s]", e.Path, e.Message, e.Rule)
}

// Is matches the sentinel ErrInvalid.
func (e *SettingError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == CodeInvalid
}

// CheckPassEnv checks a package's pass_env grant, the daemon variables an
// operator passes to it by name, wherever the grant is given (a package's
// settings, a binding). It returns nil or every refusal joined, each a
// *SettingError with the rule RulePassEnvReserved and the path
// "pass_env[i]".
func CheckPassEnv(names []string) error {
	var errs []error
	for i, name := range names {
		if ReservedEnv(name) {
			errs = append(errs, &SettingError{Rule: RulePassEnvReserved, Path: fmt.Sprintf("pass_env[%d]", i),
				Message: fmt.Sprintf("%q is reserved: pass_env grants no %s variable", name, strings.Join(ReservedEnvPrefixes(), "* or ")+"*")})
		}
	}
	return errors.Join(errs...)
}
