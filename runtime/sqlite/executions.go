package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// The lease and Execution writes. Each reads only what it must: a lease
// this transaction wrote is fenced from its own copy (tx.leases), a write's
// condition is in its statement's WHERE where one statement can hold it,
// and what a write stores is returned from what it wrote, not read back.

var _ runtime.StartTx = (*tx)(nil)

// Leases.

func (t *tx) AcquireLease(req runtime.LeaseRequest) (runtime.Lease, error) {
	if err := runtime.ValidateIdentifier("lease name", req.Name); err != nil {
		return runtime.Lease{}, err
	}
	if err := runtime.ValidateIdentifier("lease holder", req.Holder); err != nil {
		return runtime.Lease{}, err
	}
	if req.TTL <= 0 || req.Now.IsZero() {
		return runtime.Lease{}, fmt.Errorf("%w: lease %q needs a time and a positive TTL", runtime.ErrInvalid, req.Name)
	}
	l := runtime.Lease{Name: req.Name, Holder: req.Holder, ExpiresAt: req.Now.Add(req.TTL).UTC()}
	// One statement: a new lease starts at epoch 1; a stored one moves to
	// its next epoch unless another holder holds it live and the request
	// does not supersede, in which case nothing is written and no row
	// comes back.
	row, err := t.q.row(`INSERT INTO leases (name, holder, epoch, expires_at, released) VALUES (?, ?, 1, ?, 0)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = leases.epoch + 1,
		expires_at = excluded.expires_at, released = 0
		WHERE ? OR leases.released OR leases.expires_at <= ? OR leases.holder = excluded.holder
		RETURNING epoch`,
		l.Name, l.Holder, nanos(l.ExpiresAt), req.Supersede, req.Now.UnixNano())
	if err != nil {
		return runtime.Lease{}, t.execErr("acquire lease", err)
	}
	switch err := row.Scan(&l.Epoch); {
	case errors.Is(err, sql.ErrNoRows):
		held, err := t.Lease(req.Name)
		if err != nil {
			return runtime.Lease{}, err
		}
		return runtime.Lease{}, fmt.Errorf("%w: lease %q is held by %q at epoch %d until %s",
			runtime.ErrConflict, req.Name, held.Holder, held.Epoch, held.ExpiresAt.Format(time.RFC3339Nano))
	case err != nil:
		return runtime.Lease{}, t.execErr("acquire lease", err)
	}
	t.q.wrote = true
	t.wroteLease(l)
	return l, nil
}

func (t *tx) putLease(l runtime.Lease) error {
	_, err := t.q.exec(`INSERT INTO leases (name, holder, epoch, expires_at, released) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch,
		expires_at = excluded.expires_at, released = excluded.released`,
		l.Name, l.Holder, l.Epoch, nanos(l.ExpiresAt), l.Released)
	if err != nil {
		return t.execErr("put lease", err)
	}
	t.wroteLease(l)
	return nil
}

func (t *tx) wroteLease(l runtime.Lease) {
	if t.leases == nil {
		t.leases = map[string]runtime.Lease{}
	}
	t.leases[l.Name] = l
}

// lease reads a lease, from this transaction's own writes when it made one.
func (t *tx) lease(name string) (runtime.Lease, error) {
	if l, ok := t.leases[name]; ok {
		return l, nil
	}
	return t.Lease(name)
}

// fence returns the lease if epoch is its current, unreleased epoch.
func (t *tx) fence(name string, epoch int64) (runtime.Lease, error) {
	l, err := t.lease(name)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return l, fmt.Errorf("%w: lease %q does not exist, so epoch %d is not current", runtime.ErrConflict, name, epoch)
	case err != nil:
		return l, err
	case l.Epoch != epoch:
		return l, fmt.Errorf("%w: lease %q epoch %d is superseded by epoch %d", runtime.ErrConflict, name, epoch, l.Epoch)
	case l.Released:
		return l, fmt.Errorf("%w: lease %q epoch %d was released", runtime.ErrConflict, name, epoch)
	}
	return l, nil
}

func (t *tx) RenewLease(name string, epoch int64, now time.Time, ttl time.Duration) (runtime.Lease, error) {
	if err := runtime.ValidateIdentifier("lease name", name); err != nil {
		return runtime.Lease{}, err
	}
	if ttl <= 0 || now.IsZero() {
		return runtime.Lease{}, fmt.Errorf("%w: lease %q needs a time and a positive TTL", runtime.ErrInvalid, name)
	}
	l, err := t.fence(name, epoch)
	if err != nil {
		return runtime.Lease{}, err
	}
	l.ExpiresAt = now.Add(ttl).UTC()
	return l, t.putLease(l)
}

func (t *tx) ReleaseLease(name string, epoch int64) error {
	if err := runtime.ValidateIdentifier("lease name", name); err != nil {
		return err
	}
	l, err := t.fence(name, epoch)
	if err != nil {
		return err
	}
	l.Released = true
	return t.putLease(l)
}

func (t *tx) CheckLease(name string, epoch int64) error {
	if err := runtime.ValidateIdentifier("lease name", name); err != nil {
		return err
	}
	_, err := t.fence(name, epoch)
	return err
}

// Executions.

func (t *tx) PutExecution(x runtime.Execution) (runtime.Execution, error) {
	if err := runtime.ValidateIdentifier("execution id", x.ID); err != nil {
		return runtime.Execution{}, err
	}
	if err := runtime.ValidateIdentifier("execution work_id", x.WorkID); err != nil {
		return runtime.Execution{}, err
	}
	if err := runtime.ValidateIdentifier("execution lease", x.Lease); err != nil {
		return runtime.Execution{}, err
	}
	if err := runtime.ValidateOptional("execution executor", x.Executor); err != nil {
		return runtime.Execution{}, err
	}
	if !x.State.Valid() {
		return runtime.Execution{}, fmt.Errorf("%w: execution %q has unknown state %q", runtime.ErrInvalid, x.ID, x.State)
	}
	if x.Attempt < 0 {
		return runtime.Execution{}, fmt.Errorf("%w: execution %q has negative attempt %d", runtime.ErrInvalid, x.ID, x.Attempt)
	}
	if err := runtime.ValidateJSON("execution recovery", x.Recovery); err != nil {
		return runtime.Execution{}, err
	}
	if err := runtime.ValidateText("execution error", x.Error); err != nil {
		return runtime.Execution{}, err
	}
	if _, err := t.fence(x.Lease, x.Epoch); err != nil {
		if werr := t.executionOfWork(x); werr != nil {
			return runtime.Execution{}, werr // the refusal a replay of the old order gave first
		}
		return runtime.Execution{}, err
	}
	x.Recovery = rawJSON(x.Recovery)
	x.StartedAt, x.EndedAt = utc(x.StartedAt), utc(x.EndedAt)
	x.UpdatedAt = fromNanos(t.stamp())
	// An Execution never changes Work: the update applies only to a row
	// of the same Work, and a row of another is left as it is (no row
	// changed). The statement sets no indexed column, so an update writes
	// the row's page alone.
	res, err := t.q.exec(`INSERT INTO executions (id, work_id, attempt, executor, lease, epoch, state, recovery, error,
		started_at, ended_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET attempt = excluded.attempt, executor = excluded.executor, lease = excluded.lease,
		epoch = excluded.epoch, state = excluded.state, recovery = excluded.recovery, error = excluded.error,
		started_at = excluded.started_at, ended_at = excluded.ended_at, updated_at = excluded.updated_at
		WHERE executions.work_id = excluded.work_id`,
		x.ID, x.WorkID, x.Attempt, x.Executor, x.Lease, x.Epoch, string(x.State), blob(x.Recovery), x.Error,
		nanos(x.StartedAt), nanos(x.EndedAt), nanos(x.UpdatedAt))
	if err != nil {
		return runtime.Execution{}, t.execErr("put execution", err)
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return runtime.Execution{}, t.execErr("put execution", err)
	case n == 0:
		if werr := t.executionOfWork(x); werr != nil {
			return runtime.Execution{}, werr
		}
		return runtime.Execution{}, fmt.Errorf("sqlite: put execution %q: no row written", x.ID)
	}
	return x, nil
}

// executionOfWork refuses x when a stored Execution of its ID belongs to
// another Work.
func (t *tx) executionOfWork(x runtime.Execution) error {
	stored, err := t.Execution(x.ID)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return nil
	case err != nil:
		return err
	case stored.WorkID != x.WorkID:
		return fmt.Errorf("%w: execution %q belongs to work %q, not %q", runtime.ErrInvalid, x.ID, stored.WorkID, x.WorkID)
	}
	return nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// MarkRunning implements runtime.StartTx: one UPDATE whose WHERE is the
// state check and the fence. With new metadata, the Execution returned is
// x as the update leaves it, not read back (RETURNING costs SQLite a
// temporary table and a statement journal, more than the update); when
// the stored metadata is kept, the statement returns the row it wrote, so
// the metadata returned is what is stored.
func (t *tx) MarkRunning(x runtime.Execution, recovery []byte) (runtime.Execution, bool, error) {
	if err := runtime.ValidateIdentifier("execution id", x.ID); err != nil {
		return runtime.Execution{}, false, err
	}
	if err := runtime.ValidateJSON("execution recovery", recovery); err != nil {
		return runtime.Execution{}, false, err
	}
	const where = `WHERE id = ? AND state = '` + string(runtime.ExecutionStarting) + `' AND EXISTS (SELECT 1 FROM leases l
			WHERE l.name = executions.lease AND l.epoch = ? AND NOT l.released)`
	now := t.stamp()
	if recovery == nil {
		row, err := t.q.row(`UPDATE executions SET state = '`+string(runtime.ExecutionRunning)+`', epoch = ?, updated_at = ?
		`+where+` RETURNING `+executionCols, x.Epoch, now, x.ID, x.Epoch)
		if err != nil {
			return runtime.Execution{}, false, t.execErr("mark running", err)
		}
		marked, err := scanExecution(row)
		if errors.Is(err, sql.ErrNoRows) {
			return runtime.Execution{}, false, nil
		}
		if err != nil {
			return runtime.Execution{}, false, t.execErr("mark running", err)
		}
		t.q.wrote = true
		return marked, true, nil
	}
	res, err := t.q.exec(`UPDATE executions SET state = '`+string(runtime.ExecutionRunning)+`', epoch = ?, updated_at = ?, recovery = ?
		`+where, x.Epoch, now, blob(recovery), x.ID, x.Epoch)
	if err != nil {
		return runtime.Execution{}, false, t.execErr("mark running", err)
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return runtime.Execution{}, false, t.execErr("mark running", err)
	case n == 0:
		return runtime.Execution{}, false, nil
	}
	x.State, x.Recovery, x.UpdatedAt = runtime.ExecutionRunning, rawJSON(bytes.Clone(recovery)), fromNanos(now)
	return x, true, nil
}

func (t *tx) PersistRecovery(executionID string, epoch int64, recovery []byte) error {
	if err := runtime.ValidateIdentifier("execution id", executionID); err != nil {
		return err
	}
	if err := runtime.ValidateJSON("execution recovery", recovery); err != nil {
		return err
	}
	x, err := t.Execution(executionID)
	if err != nil {
		return err
	}
	if _, err := t.fence(x.Lease, epoch); err != nil {
		return fmt.Errorf("persist recovery of execution %q: %w", executionID, err)
	}
	_, err = t.q.exec(`UPDATE executions SET recovery = ?, epoch = ?, updated_at = ? WHERE id = ?`,
		blob(recovery), epoch, t.stamp(), executionID)
	if err != nil {
		return t.execErr("persist recovery", err)
	}
	return nil
}

// SetWorkState implements runtime.StartTx: one UPDATE of the state, the
// revision and the update time, whose WHERE is the revision check. Only
// the state index changes (PutWork rewrites every column, and so its scope
// index entry too), and nothing is read unless the check refuses. The
// Work returned is built from w, as PutWork's is, not read back: an
// UPDATE with RETURNING costs SQLite a temporary table and a statement
// journal, more than the update itself.
func (t *tx) SetWorkState(w runtime.Work, state runtime.WorkState) (runtime.Work, error) {
	if err := t.refuseChange(); err != nil {
		return runtime.Work{}, err
	}
	if err := runtime.ValidateIdentifier("work id", w.ID); err != nil {
		return runtime.Work{}, err
	}
	if !state.Valid() {
		return runtime.Work{}, fmt.Errorf("%w: work %q has unknown state %q", runtime.ErrInvalid, w.ID, state)
	}
	if w.Revision <= 0 {
		return runtime.Work{}, fmt.Errorf("%w: work %q: a state change needs the stored revision, not %d", runtime.ErrInvalid, w.ID, w.Revision)
	}
	now := t.stamp()
	res, err := t.q.exec(`UPDATE works SET state = ?, revision = revision + 1, updated_at = ?
		WHERE id = ? AND revision = ?`, string(state), now, w.ID, w.Revision)
	if err != nil {
		return runtime.Work{}, t.execErr("set work state", err)
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return runtime.Work{}, t.execErr("set work state", err)
	case n == 0:
		// Refused: read the Work to say why, as PutWork does.
		cur, err := t.Work(w.ID)
		if errors.Is(err, runtime.ErrNotFound) {
			return runtime.Work{}, fmt.Errorf("%w: work %q (revision %d)", runtime.ErrNotFound, w.ID, w.Revision)
		}
		if err != nil {
			return runtime.Work{}, err
		}
		return runtime.Work{}, fmt.Errorf("%w: work %q is at revision %d, not %d", runtime.ErrConflict, w.ID, cur.Revision, w.Revision)
	}
	w.State, w.Revision, w.UpdatedAt = state, w.Revision+1, fromNanos(now)
	if err := t.logChange(runtime.Change{Kind: runtime.ChangeWork, ID: w.ID, ScopeID: w.ScopeID,
		State: w.State, Revision: w.Revision, At: w.UpdatedAt}); err != nil {
		return runtime.Work{}, err
	}
	return w, nil
}

// PendingWork implements runtime.StartTx: one read that leaves
// the held-back Work out with a join on the timers' key, where a page of
// Works and a timer read for each would take a statement per Work.
func (r *reader) PendingWork(after, retryPrefix string, now time.Time, limit int) ([]runtime.Work, error) {
	return list(r, scanWork, "pending works", qPendingWork,
		retryPrefix, string(runtime.WorkPending), after, now.UnixNano(), pageLimit(limit))
}

const qPendingWork = `SELECT ` + workCols + ` FROM works w
	LEFT JOIN timers t ON t.key = ? || w.id
	WHERE w.state = ? AND w.id > ? AND (t.key IS NULL OR t.due <= ?)
	ORDER BY w.id LIMIT ?`

// PriorAttempts implements runtime.StartTx: the count of the Work's
// Executions, its last one's state and metadata and the KV entry in one
// read, where Executions and KVGet take two statements (and Executions
// reads every attempt).
func (r *reader) PriorAttempts(workID, namespace, key string) (runtime.PriorAttempts, error) {
	if err := runtime.ValidateNamespace(namespace); err != nil {
		return runtime.PriorAttempts{}, err
	}
	if err := runtime.ValidateKey(key); err != nil {
		return runtime.PriorAttempts{}, err
	}
	row, err := r.q.row(qPriorAttempts, namespace, []byte(key), workID)
	if err != nil {
		return runtime.PriorAttempts{}, err
	}
	var (
		p                    runtime.PriorAttempts
		last, state, version sql.NullString
		recovery, value      []byte
	)
	if err := row.Scan(&p.Executions, &last, &state, &recovery, &value, &version); err != nil {
		return runtime.PriorAttempts{}, fmt.Errorf("sqlite: prior attempts of work %q: %w", workID, err)
	}
	p.LastState, p.LastRecovery = runtime.ExecutionState(state.String), rawJSON(recovery)
	if version.Valid {
		if value == nil {
			value = []byte{}
		}
		p.Entry = runtime.KVEntry{Namespace: namespace, Key: key, Value: value, Version: version.String}
		p.Found = true
	}
	return p, nil
}

// qPriorAttempts is an aggregate, so one row whatever exists. With one
// max() in it, SQLite takes the bare columns from the row that has the
// max: the last attempt by (attempt, ID), attempts being non-negative and
// padded to sort as numbers. The KV entry is a constant subquery, run
// once. (A join to a sorted LIMIT 1 subquery would cost a temporary
// table and a sort.)
const qPriorAttempts = `SELECT count(*), max(printf('%020d', attempt) || id), state, recovery,
	(SELECT value FROM kv WHERE namespace = ?1 AND key = ?2), (SELECT version FROM kv WHERE namespace = ?1 AND key = ?2)
	FROM executions WHERE work_id = ?3`
