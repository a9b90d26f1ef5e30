package host

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// RunTask runs one of the extension's declared tasks (task.run) with now,
// the host's clock (the daemon's, which a test clock moves), and returns
// the one line the extension says of the pass. The line is the
// extension's: a caller that shows it bounds it first.
func (r *Remote) RunTask(ctx context.Context, name string, now time.Time) (detail string, err error) {
	var res protocol.TaskRunResult
	if err := r.conn.Call(ctx, "task.run", protocol.TaskRunParams{Task: name, Now: now.UTC()}, &res); err != nil {
		return "", protocolToRuntime(err)
	}
	return res.Detail, nil
}
