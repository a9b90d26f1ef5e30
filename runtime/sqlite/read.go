package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/runtime"
)

// querier runs statements in one transaction, refusing them once the
// transaction's function has returned.
type querier struct {
	ctx context.Context
	// A View's transaction is tx. The writer's is on conn, its statements
	// run with run, a context that is never done (see Store.run), after
	// a check of ctx.
	tx    *sql.Tx
	conn  *sql.Conn
	run   context.Context
	cache *stmtCache
	done  bool
	// wrote is set once a statement changed a row: only then does the
	// commit write (and sync) the log.
	wrote bool
}

var errTxDone = fmt.Errorf("%w: the transaction has finished", runtime.ErrInvalid)

// runner is what runs a statement: the writer's connection or a View's
// transaction (both take the SQL), or a prepared statement (stmtRunner).
type runner interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// stmtRunner runs its prepared statement whatever SQL it is handed (the
// statement's own).
type stmtRunner struct{ st *sql.Stmt }

func (r stmtRunner) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	return r.st.QueryContext(ctx, args...)
}

func (r stmtRunner) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return r.st.QueryRowContext(ctx, args...)
}

func (r stmtRunner) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return r.st.ExecContext(ctx, args...)
}

// check refuses a statement once the transaction has finished or, on the
// writer, once ctx is done.
func (q *querier) check() error {
	if q.done {
		return errTxDone
	}
	if q.conn != nil {
		return q.ctx.Err()
	}
	return nil
}

// runner is what runs query, after check, and the context to run it with:
// its prepared statement when the cache has one, on the writer's
// connection with q.run (never done: see Store.run), in a View's
// transaction with ctx.
func (q *querier) runner(query string) (context.Context, runner, error) {
	if err := q.check(); err != nil {
		return nil, nil, err
	}
	st := q.cache.get(query)
	switch {
	case q.conn != nil && st != nil:
		return q.run, stmtRunner{st}, nil
	case q.conn != nil:
		return q.run, q.conn, nil
	case st != nil:
		return q.ctx, stmtRunner{q.tx.StmtContext(q.ctx, st)}, nil
	}
	return q.ctx, q.tx, nil
}

func (q *querier) query(query string, args ...any) (*sql.Rows, error) {
	ctx, r, err := q.runner(query)
	if err != nil {
		return nil, err
	}
	return r.QueryContext(ctx, query, args...)
}

func (q *querier) row(query string, args ...any) (*sql.Row, error) {
	ctx, r, err := q.runner(query)
	if err != nil {
		return nil, err
	}
	return r.QueryRowContext(ctx, query, args...), nil
}

func (q *querier) exec(query string, args ...any) (res sql.Result, err error) {
	ctx, r, err := q.runner(query)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil && !q.wrote {
			n, nerr := res.RowsAffected()
			q.wrote = nerr != nil || n > 0 // unknown counts as written
		}
	}()
	return r.ExecContext(ctx, query, args...)
}

// reader implements runtime.ReadTx.
type reader struct {
	q querier
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func encodeList(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l) // strings always marshal
	return string(b)
}

func decodeList(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("sqlite: stored list %q: %w", s, err)
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l, nil
}

// blob returns nil for an absent document so it is stored as NULL.
func blob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// single reads one row and maps no row onto ErrNotFound.
func single[T any](r *reader, scan func(scanner) (T, error), what, id string, query string, args ...any) (T, error) {
	var zero T
	row, err := r.q.row(query, args...)
	if err != nil {
		return zero, err
	}
	v, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return zero, fmt.Errorf("%w: %s %q", runtime.ErrNotFound, what, id)
	}
	if err != nil {
		return zero, fmt.Errorf("sqlite: read %s %q: %w", what, id, err)
	}
	return v, nil
}

func list[T any](r *reader, scan func(scanner) (T, error), what string, query string, args ...any) ([]T, error) {
	rows, err := r.q.query(query, args...)
	if err != nil {
		if errors.Is(err, errTxDone) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list %s: %w", what, err)
	}
	return out, nil
}

func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return runtime.DefaultPageLimit
	case limit > runtime.MaxPageLimit:
		return runtime.MaxPageLimit
	}
	return limit
}

func checkCursor(after int64) error {
	if after < 0 {
		return fmt.Errorf("%w: negative cursor %d", runtime.ErrInvalid, after)
	}
	return nil
}

// Events.

const eventCols = `e.sequence, e.id, e.source, e.delivery_id, e.scope_id, e.family, e.type, e.schema,
	e.payload, e.parent, e.root, e.depth, e.works, e.occurred_at, e.accepted_at, e.signature`

// The indexed page reads: each seeks its index to the cursor and reads
// forward, so a page costs what it returns.
const (
	qScopeEvents = `SELECT ` + eventCols + ` FROM events e INDEXED BY events_by_scope
		WHERE e.scope_id = ? AND e.sequence > ? ORDER BY e.sequence LIMIT ?`
	// A Work's events: the one that created it (works.origin, 0 if none
	// is recorded there) and those linked in event_works.
	qWorkEvents = `SELECT ` + eventCols + ` FROM events e WHERE e.sequence IN (
		SELECT o.origin FROM works o WHERE o.id = ?1 AND o.origin > ?2
		UNION ALL SELECT w.sequence FROM event_works w WHERE w.work_id = ?1 AND w.sequence > ?2)
		ORDER BY e.sequence LIMIT ?3`
	qChanges = `SELECT seq, kind, ref, scope_id, sequence, state, revision, at FROM changes
		WHERE seq > ? ORDER BY seq LIMIT ?`
	// waits_one_active is a partial index of the active Waits by Work ID.
	qActiveWaits = `SELECT ` + waitCols + ` FROM waits t INDEXED BY waits_one_active
		WHERE t.state = 'active' AND t.work_id > ? ORDER BY t.work_id LIMIT ?`
)

func scanEvent(s scanner) (runtime.Event, error) {
	var (
		e                  runtime.Event
		payload            []byte
		works              string
		occurred, accepted int64
	)
	err := s.Scan(&e.Sequence, &e.ID, &e.Source, &e.DeliveryID, &e.ScopeID, &e.Family, &e.Type, &e.Schema,
		&payload, &e.Parent, &e.Root, &e.Depth, &works, &occurred, &accepted, &e.Signature)
	if err != nil {
		return e, err
	}
	e.Payload = rawJSON(payload)
	if e.Works, err = decodeList(works); err != nil {
		return e, err
	}
	e.OccurredAt = fromNanos(occurred)
	e.AcceptedAt = fromNanos(accepted)
	return e, nil
}

func (r *reader) Event(id string) (runtime.Event, error) {
	return single(r, scanEvent, "event", id, `SELECT `+eventCols+` FROM events e WHERE e.id = ?`, id)
}

func (r *reader) EventByDelivery(source, deliveryID string) (runtime.Event, error) {
	return single(r, scanEvent, "event", source+"/"+deliveryID,
		`SELECT `+eventCols+` FROM events e WHERE e.source = ? AND e.delivery_id = ?`, source, deliveryID)
}

func (r *reader) Events(after int64, limit int) ([]runtime.Event, error) {
	if err := checkCursor(after); err != nil {
		return nil, err
	}
	return list(r, scanEvent, "events",
		`SELECT `+eventCols+` FROM events e WHERE e.sequence > ? ORDER BY e.sequence LIMIT ?`, after, pageLimit(limit))
}

func (r *reader) ScopeEvents(scopeID string, after int64, limit int) ([]runtime.Event, error) {
	if err := checkCursor(after); err != nil {
		return nil, err
	}
	return list(r, scanEvent, "scope events", qScopeEvents, scopeID, after, pageLimit(limit))
}

func (r *reader) WorkEvents(workID string, after int64, limit int) ([]runtime.Event, error) {
	if err := checkCursor(after); err != nil {
		return nil, err
	}
	return list(r, scanEvent, "work events", qWorkEvents, workID, after, pageLimit(limit))
}

func (r *reader) LatestSequence() (int64, error) {
	row, err := r.q.row(`SELECT COALESCE(MAX(sequence), 0) FROM events`)
	if err != nil {
		return 0, err
	}
	var seq int64
	if err := row.Scan(&seq); err != nil {
		return 0, fmt.Errorf("sqlite: latest sequence: %w", err)
	}
	return seq, nil
}

// Changes.

func scanChange(s scanner) (runtime.Change, error) {
	var (
		c           runtime.Change
		kind, state string
		at          int64
	)
	if err := s.Scan(&c.Seq, &kind, &c.ID, &c.ScopeID, &c.Sequence, &state, &c.Revision, &at); err != nil {
		return c, err
	}
	c.Kind, c.State, c.At = runtime.ChangeKind(kind), runtime.WorkState(state), fromNanos(at)
	return c, nil
}

func (r *reader) Changes(after int64, limit int) ([]runtime.Change, error) {
	if err := checkCursor(after); err != nil {
		return nil, err
	}
	return list(r, scanChange, "changes", qChanges, after, pageLimit(limit))
}

func (r *reader) LatestChange() (int64, error) {
	row, err := r.q.row(`SELECT COALESCE(MAX(seq), 0) FROM changes`)
	if err != nil {
		return 0, err
	}
	var seq int64
	if err := row.Scan(&seq); err != nil {
		return 0, fmt.Errorf("sqlite: latest change: %w", err)
	}
	return seq, nil
}

// Scopes.

const scopeCols = `id, name, config, updated_at`

func scanScope(s scanner) (runtime.Scope, error) {
	var (
		sc      runtime.Scope
		config  []byte
		updated int64
	)
	if err := s.Scan(&sc.ID, &sc.Name, &config, &updated); err != nil {
		return sc, err
	}
	sc.Config = rawJSON(config)
	sc.UpdatedAt = fromNanos(updated)
	return sc, nil
}

func (r *reader) Scope(id string) (runtime.Scope, error) {
	return single(r, scanScope, "scope", id, `SELECT `+scopeCols+` FROM scopes WHERE id = ?`, id)
}

func (r *reader) Scopes() ([]runtime.Scope, error) {
	return list(r, scanScope, "scopes", `SELECT `+scopeCols+` FROM scopes ORDER BY id`)
}

// Works.

const workCols = `w.id, w.scope_id, w.kind, w.binding, w.state, w.correlation_keys, w.display, w.context,
	w.grants, w.revision, w.created_at, w.updated_at`

func scanWork(s scanner) (runtime.Work, error) {
	var (
		w                runtime.Work
		keys, grants     string
		display, wctx    []byte
		created, updated int64
	)
	err := s.Scan(&w.ID, &w.ScopeID, &w.Kind, &w.Binding, &w.State, &keys, &display, &wctx,
		&grants, &w.Revision, &created, &updated)
	if err != nil {
		return w, err
	}
	if w.CorrelationKeys, err = decodeList(keys); err != nil {
		return w, err
	}
	if w.Grants, err = decodeList(grants); err != nil {
		return w, err
	}
	w.Display = rawJSON(display)
	w.Context = rawJSON(wctx)
	w.CreatedAt = fromNanos(created)
	w.UpdatedAt = fromNanos(updated)
	return w, nil
}

func (r *reader) Work(id string) (runtime.Work, error) {
	return single(r, scanWork, "work", id, `SELECT `+workCols+` FROM works w WHERE w.id = ?`, id)
}

func (r *reader) Works(f runtime.WorkFilter) ([]runtime.Work, error) {
	query, args := worksQuery(f)
	return list(r, scanWork, "works", query, args...)
}

// worksQuery is the page query of a WorkFilter and its arguments.
func worksQuery(f runtime.WorkFilter) (string, []any) {
	query := `SELECT ` + workCols + ` FROM works w WHERE w.id > ?`
	args := []any{f.After}
	order := `w.id`
	if f.CorrelationKey != "" {
		// The key's own index leads (CROSS JOIN fixes the join order), so a
		// lookup by key costs the Work holding it, not a scan of the
		// scope's Work, which the planner chose otherwise.
		query = `SELECT ` + workCols + ` FROM work_keys k CROSS JOIN works w ON w.id = k.work_id
			WHERE k.key = ? AND k.work_id > ?`
		args = []any{f.CorrelationKey, f.After}
		order = `k.work_id` // the same value, in the index's order
	}
	if f.ScopeID != "" {
		query += ` AND w.scope_id = ?`
		args = append(args, f.ScopeID)
	}
	if f.Kind != "" {
		query += ` AND w.kind = ?`
		args = append(args, f.Kind)
	}
	if f.State != "" {
		query += ` AND w.state = ?`
		args = append(args, string(f.State))
	}
	query += ` ORDER BY ` + order + ` LIMIT ?`
	args = append(args, pageLimit(f.Limit))
	return query, args
}

// Executions.

const executionCols = `id, work_id, attempt, executor, lease, epoch, state, recovery, error,
	started_at, ended_at, updated_at`

func scanExecution(s scanner) (runtime.Execution, error) {
	var (
		x                       runtime.Execution
		recovery                []byte
		started, ended, updated int64
	)
	err := s.Scan(&x.ID, &x.WorkID, &x.Attempt, &x.Executor, &x.Lease, &x.Epoch, &x.State, &recovery, &x.Error,
		&started, &ended, &updated)
	if err != nil {
		return x, err
	}
	x.Recovery = rawJSON(recovery)
	x.StartedAt = fromNanos(started)
	x.EndedAt = fromNanos(ended)
	x.UpdatedAt = fromNanos(updated)
	return x, nil
}

func (r *reader) Execution(id string) (runtime.Execution, error) {
	return single(r, scanExecution, "execution", id, `SELECT `+executionCols+` FROM executions WHERE id = ?`, id)
}

func (r *reader) Executions(workID string) ([]runtime.Execution, error) {
	return list(r, scanExecution, "executions",
		`SELECT `+executionCols+` FROM executions WHERE work_id = ? ORDER BY attempt, id`, workID)
}

// Leases.

func scanLease(s scanner) (runtime.Lease, error) {
	var (
		l       runtime.Lease
		expires int64
	)
	if err := s.Scan(&l.Name, &l.Holder, &l.Epoch, &expires, &l.Released); err != nil {
		return l, err
	}
	l.ExpiresAt = fromNanos(expires)
	return l, nil
}

func (r *reader) Lease(name string) (runtime.Lease, error) {
	return single(r, scanLease, "lease", name,
		`SELECT name, holder, epoch, expires_at, released FROM leases WHERE name = ?`, name)
}

// Waits.

const waitCols = `t.id, t.work_id, t.keys, t.target, t.description, t.progress, t.owner, t.state,
	t.deadline, t.created_at, t.resolved_at`

func scanWait(s scanner) (runtime.Wait, error) {
	var (
		w                           runtime.Wait
		keys                        string
		deadline, created, resolved int64
	)
	err := s.Scan(&w.ID, &w.WorkID, &keys, &w.Target, &w.Description, &w.Progress, &w.Owner, &w.State,
		&deadline, &created, &resolved)
	if err != nil {
		return w, err
	}
	if w.Keys, err = decodeList(keys); err != nil {
		return w, err
	}
	w.Deadline = fromNanos(deadline)
	w.CreatedAt = fromNanos(created)
	w.ResolvedAt = fromNanos(resolved)
	return w, nil
}

func (r *reader) Wait(id string) (runtime.Wait, error) {
	return single(r, scanWait, "wait", id, `SELECT `+waitCols+` FROM waits t WHERE t.id = ?`, id)
}

func (r *reader) ActiveWait(workID string) (runtime.Wait, error) {
	return single(r, scanWait, "active wait of work", workID,
		`SELECT `+waitCols+` FROM waits t WHERE t.work_id = ? AND t.state = 'active'`, workID)
}

func (r *reader) Waits(workID string) ([]runtime.Wait, error) {
	return list(r, scanWait, "waits",
		`SELECT `+waitCols+` FROM waits t WHERE t.work_id = ? ORDER BY t.created_at, t.id`, workID)
}

func (r *reader) ActiveWaits(afterWork string, limit int) ([]runtime.Wait, error) {
	return list(r, scanWait, "active waits", qActiveWaits, afterWork, pageLimit(limit))
}

func (r *reader) WaitsForKey(key string) ([]runtime.Wait, error) {
	return list(r, scanWait, "waits for key",
		`SELECT `+waitCols+` FROM wait_keys k JOIN waits t ON t.id = k.wait_id
		WHERE k.key = ? AND t.state = 'active' ORDER BY t.created_at, t.id`, key)
}

// Timers.

const timerCols = `key, scope_id, work_id, kind, due, recurrence, payload, armed_at`

func scanTimer(s scanner) (runtime.Timer, error) {
	var (
		t          runtime.Timer
		payload    []byte
		due, armed int64
	)
	if err := s.Scan(&t.Key, &t.ScopeID, &t.WorkID, &t.Kind, &due, &t.Recurrence, &payload, &armed); err != nil {
		return t, err
	}
	t.Due = fromNanos(due)
	t.Payload = rawJSON(payload)
	t.ArmedAt = fromNanos(armed)
	return t, nil
}

func (r *reader) Timer(key string) (runtime.Timer, error) {
	return single(r, scanTimer, "timer", key, `SELECT `+timerCols+` FROM timers WHERE key = ?`, key)
}

func (r *reader) DueTimers(t time.Time, limit int) ([]runtime.Timer, error) {
	return list(r, scanTimer, "due timers",
		`SELECT `+timerCols+` FROM timers WHERE due <= ? ORDER BY due, key LIMIT ?`, nanos(t), pageLimit(limit))
}

// KV.

func (r *reader) KVGet(namespace, key string) (runtime.KVEntry, bool, error) {
	if err := runtime.ValidateNamespace(namespace); err != nil {
		return runtime.KVEntry{}, false, err
	}
	if err := runtime.ValidateKey(key); err != nil {
		return runtime.KVEntry{}, false, err
	}
	e, err := r.kvGet(namespace, key)
	if errors.Is(err, runtime.ErrNotFound) {
		return runtime.KVEntry{}, false, nil
	}
	return e, err == nil, err
}

func scanKV(s scanner) (runtime.KVEntry, error) {
	var (
		e   runtime.KVEntry
		key []byte
	)
	if err := s.Scan(&e.Namespace, &key, &e.Value, &e.Version); err != nil {
		return e, err
	}
	e.Key = string(key)
	if e.Value == nil {
		e.Value = []byte{}
	}
	return e, nil
}

func (r *reader) kvGet(namespace, key string) (runtime.KVEntry, error) {
	return single(r, scanKV, "kv entry", namespace+"/"+key,
		`SELECT namespace, key, value, version FROM kv WHERE namespace = ? AND key = ?`, namespace, []byte(key))
}

func (r *reader) KVList(namespace, prefix, after string, limit int) ([]runtime.KVEntry, error) {
	if err := runtime.ValidateNamespace(namespace); err != nil {
		return nil, err
	}
	// Keys are stored as blobs, so they compare byte by byte, and a prefix
	// is the range [prefix, upper).
	from, fromOp := []byte(prefix), ">="
	if after != "" && after >= prefix {
		from, fromOp = []byte(after), ">"
	}
	query := `SELECT namespace, key, value, version FROM kv WHERE namespace = ? AND key ` + fromOp + ` ?`
	args := []any{namespace, from}
	if upper := prefixUpper(prefix); upper != nil {
		query += ` AND key < ?`
		args = append(args, upper)
	}
	query += ` ORDER BY key LIMIT ?`
	args = append(args, pageLimit(limit))
	return list(r, scanKV, "kv entries", query, args...)
}

// prefixUpper is the least byte string greater than every string with the
// prefix, or nil if there is none (an empty prefix or all 0xff bytes).
func prefixUpper(prefix string) []byte {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1]
		}
	}
	return nil
}

// Artifacts.

const artifactCols = `id, work_id, execution_id, name, media_type, digest, size, created_at`

func scanArtifact(s scanner) (runtime.Artifact, error) {
	var (
		a       runtime.Artifact
		created int64
	)
	if err := s.Scan(&a.ID, &a.WorkID, &a.ExecutionID, &a.Name, &a.MediaType, &a.Digest, &a.Size, &created); err != nil {
		return a, err
	}
	a.CreatedAt = fromNanos(created)
	return a, nil
}

func (r *reader) Artifact(id string) (runtime.Artifact, error) {
	return single(r, scanArtifact, "artifact", id, `SELECT `+artifactCols+` FROM artifacts WHERE id = ?`, id)
}

func (r *reader) Artifacts(workID string) ([]runtime.Artifact, error) {
	return list(r, scanArtifact, "artifacts",
		`SELECT `+artifactCols+` FROM artifacts WHERE work_id = ? ORDER BY id`, workID)
}

// Toolbelt results.

func scanToolResult(s scanner) (runtime.ToolResult, error) {
	var (
		t         runtime.ToolResult
		result    []byte
		committed int64
	)
	if err := s.Scan(&t.RequestID, &t.Operation, &result, &t.ErrorCode, &t.ErrorMessage, &committed); err != nil {
		return t, err
	}
	t.Result = rawJSON(result)
	t.CommittedAt = fromNanos(committed)
	return t, nil
}

func (r *reader) ToolResult(requestID string) (runtime.ToolResult, error) {
	return single(r, scanToolResult, "tool result", requestID,
		`SELECT request_id, operation, result, error_code, error_message, committed_at FROM tool_results WHERE request_id = ?`,
		requestID)
}
