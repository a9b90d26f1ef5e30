package host

import (
	"context"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/runtime"
)

// The codes a check's answer gets when it is not a full check: the
// spec's names (Doctor checks).
const (
	// CheckFailedCode: the answer had no status and ok was false (or the
	// check could not be run).
	CheckFailedCode = "extension_check_failed"
	// CheckInvalidCode: the answer's status is none of ok, info, warn
	// and fail.
	CheckInvalidCode = "extension_check_invalid"
)

// RunCheck runs one of the package's doctor checks through check.run with
// p (the check's name, deep, and the read-only configuration view) and
// grades the answer as the spec does: {ok, detail} without status is ok,
// or warn with extension_check_failed when ok is false; an unknown status
// is warn with extension_check_invalid. Check's Run is RunCheck without a
// configuration view.
func (r *Remote) RunCheck(ctx context.Context, p protocol.CheckRunParams) (runtime.CheckResult, error) {
	var res protocol.CheckRunResult
	if err := r.conn.Call(ctx, "check.run", p, &res); err != nil {
		return runtime.CheckResult{}, protocolToRuntime(err)
	}
	out := runtime.CheckResult{Code: res.Code, Detail: res.Detail, Items: res.Items}
	switch res.Status {
	case "":
		out.Status = runtime.CheckOK
		if !res.OK {
			out.Status, out.Code = runtime.CheckWarn, CheckFailedCode
		}
	case protocol.CheckOK, protocol.CheckInfo, protocol.CheckWarn, protocol.CheckFail:
		out.Status = runtime.CheckStatus(res.Status)
	default:
		out.Status, out.Code = runtime.CheckWarn, CheckInvalidCode
	}
	return out, nil
}
