package sqlite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sqlitedriver "modernc.org/sqlite"

	"github.com/open-conduit/open-conduit/runtime"
)

// sqliteConstraintUnique is SQLite's extended result code
// SQLITE_CONSTRAINT_UNIQUE.
const sqliteConstraintUnique = 2067

func isUniqueViolation(err error) bool {
	var e *sqlitedriver.Error
	return errors.As(err, &e) && e.Code() == sqliteConstraintUnique
}

// sqliteConstraintPrimaryKey is SQLITE_CONSTRAINT_PRIMARYKEY.
const sqliteConstraintPrimaryKey = 1555

// isKeyViolation reports a statement refused on a primary key or a
// unique index.
func isKeyViolation(err error) bool {
	var e *sqlitedriver.Error
	return errors.As(err, &e) && (e.Code() == sqliteConstraintUnique || e.Code() == sqliteConstraintPrimaryKey)
}

// tx implements runtime.Tx. Every write validates all its input and checks
// every condition before its first statement, so a refused write leaves
// nothing behind even if the caller goes on to commit. (A storage error
// between two statements of one operation can leave part of it; the
// contract asks the caller to roll back after one.)
type tx struct {
	reader
	now func() time.Time
	// deferSync marks a TransactDeferSync transaction, which may record
	// no Change; refused is set when one tried, so it never commits.
	deferSync, refused bool
	// acceptedSeq is the sequence of the last Event this transaction
	// added, 0 if none; sequences holds those of the Events it added or
	// read by identity (they never change), so linking one to Work
	// needs no read.
	acceptedSeq int64
	sequences   map[string]int64
	// changes are the Changes logged and not yet written (logChange).
	changes []runtime.Change
	// leases holds the lease rows this transaction wrote, as written: the
	// fence of a later write in it needs no read (every lease write goes
	// through putLease).
	leases map[string]runtime.Lease
	// activeWaits is the store's count of active Waits as this
	// transaction began, -1 when the store does not know it; waitDelta is
	// what this transaction's writes changed it by.
	activeWaits, waitDelta int64
	// originless is the Work this transaction created last, until an
	// Event is linked to it: that link is recorded as its origin.
	originless string
}

// errDeferredChange refuses a Change in a deferred-sync transaction: a
// change stream shows only what is on disk.
var errDeferredChange = fmt.Errorf("%w: a deferred-sync transaction records no change (accept an event, put a work)", runtime.ErrInvalid)

// refuseChange is checked before the first statement of a write that
// records a Change.
func (t *tx) refuseChange() error {
	if t.deferSync {
		t.refused = true
		return errDeferredChange
	}
	return nil
}

func (t *tx) stamp() int64 { return t.now().UnixNano() }

func (t *tx) execErr(what string, err error) error {
	if errors.Is(err, errTxDone) {
		return err
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

// Events.

func (t *tx) AcceptEvent(env runtime.Envelope) (runtime.Event, bool, error) {
	return t.acceptEvent(env, 0)
}

// AcceptEventAt implements runtime.PreAcceptTx.
func (t *tx) AcceptEventAt(env runtime.Envelope, at time.Time) (runtime.Event, bool, error) {
	if at.IsZero() {
		return runtime.Event{}, false, fmt.Errorf("%w: an acceptance time is required", runtime.ErrInvalid)
	}
	return t.acceptEvent(env, at.UnixNano())
}

// acceptEvent accepts env, stamping a new Event at stamp (the store's
// clock when 0).
func (t *tx) acceptEvent(env runtime.Envelope, stamp int64) (runtime.Event, bool, error) {
	if err := t.refuseChange(); err != nil {
		return runtime.Event{}, false, err
	}
	sig, err := runtime.ValidateEnvelope(env)
	if err != nil {
		return runtime.Event{}, false, err
	}
	stored, err := t.EventByDelivery(env.Source, env.DeliveryID)
	switch {
	case err == nil:
		t.knowSequence(stored.ID, stored.Sequence)
		if stored.Signature != sig {
			return runtime.Event{}, false, fmt.Errorf("%w: event %s/%s was accepted with different content",
				runtime.ErrConflict, env.Source, env.DeliveryID)
		}
		if env.ID != "" && env.ID != stored.ID {
			return runtime.Event{}, false, fmt.Errorf("%w: event %s/%s was accepted as %q, not %q",
				runtime.ErrConflict, env.Source, env.DeliveryID, stored.ID, env.ID)
		}
		return stored, false, nil
	case !errors.Is(err, runtime.ErrNotFound):
		return runtime.Event{}, false, err
	}

	ev := runtime.Event{Envelope: env, Signature: sig}
	if ev.ID == "" {
		ev.ID = runtime.DefaultEventID(env.Source, env.DeliveryID)
	}
	ev.Root, ev.Depth = ev.ID, 0
	if env.Parent != "" {
		parent, err := t.Event(env.Parent)
		if errors.Is(err, runtime.ErrNotFound) {
			return runtime.Event{}, false, fmt.Errorf("%w: parent %q is not an accepted event", runtime.ErrInvalid, env.Parent)
		}
		if err != nil {
			return runtime.Event{}, false, err
		}
		if parent.ScopeID != env.ScopeID {
			return runtime.Event{}, false, fmt.Errorf("%w: parent %q is in scope %q, not %q",
				runtime.ErrInvalid, env.Parent, parent.ScopeID, env.ScopeID)
		}
		ev.Root, ev.Depth = parent.Root, parent.Depth+1
	}
	ev.Works = normaliseSet(env.Works)
	ev.Payload = rawJSON(slices.Clone(env.Payload))
	if stamp == 0 {
		stamp = t.stamp()
	}
	ev.AcceptedAt = fromNanos(stamp)
	if !env.OccurredAt.IsZero() {
		ev.OccurredAt = env.OccurredAt.UTC()
	}
	res, err := t.q.exec(`INSERT INTO events (id, source, delivery_id, scope_id, family, type, schema, payload,
		parent, root, depth, works, occurred_at, accepted_at, signature)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.ID, ev.Source, ev.DeliveryID, ev.ScopeID, ev.Family, ev.Type, ev.Schema, blob(ev.Payload),
		ev.Parent, ev.Root, ev.Depth, encodeList(ev.Works), nanos(ev.OccurredAt), nanos(ev.AcceptedAt), ev.Signature)
	if isUniqueViolation(err) {
		// The identity is new (looked up above), so the ID is taken by
		// another identity. The failed statement wrote nothing.
		return runtime.Event{}, false, fmt.Errorf("%w: event ID %q already names another delivery than %s/%s",
			runtime.ErrConflict, ev.ID, env.Source, env.DeliveryID)
	}
	if err != nil {
		return runtime.Event{}, false, t.execErr("accept event", err)
	}
	if ev.Sequence, err = res.LastInsertId(); err != nil {
		return runtime.Event{}, false, t.execErr("accept event", err)
	}
	t.acceptedSeq = ev.Sequence
	t.knowSequence(ev.ID, ev.Sequence)
	for _, w := range ev.Works {
		if _, err := t.q.exec(`INSERT OR IGNORE INTO event_works (work_id, sequence) VALUES (?, ?)`, w, ev.Sequence); err != nil {
			return runtime.Event{}, false, t.execErr("accept event", err)
		}
	}
	if err := t.logChange(runtime.Change{Kind: runtime.ChangeEvent, ID: ev.ID, ScopeID: ev.ScopeID,
		Sequence: ev.Sequence, At: ev.AcceptedAt}); err != nil {
		return runtime.Event{}, false, err
	}
	return ev, true, nil
}

func normaliseSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(in))
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (t *tx) knowSequence(eventID string, seq int64) {
	if t.sequences == nil {
		t.sequences = map[string]int64{}
	}
	t.sequences[eventID] = seq
}

func (t *tx) LinkEventWork(eventID, workID string) error {
	if err := runtime.ValidateIdentifier("event_id", eventID); err != nil {
		return err
	}
	if err := runtime.ValidateIdentifier("work_id", workID); err != nil {
		return err
	}
	seq, ok := t.sequences[eventID]
	if !ok {
		ev, err := t.Event(eventID)
		if err != nil {
			return err
		}
		seq = ev.Sequence
	}
	if workID == t.originless {
		t.originless = ""
		if _, err := t.q.exec(`UPDATE works SET origin = ? WHERE id = ?`, seq, workID); err != nil {
			return t.execErr("link event", err)
		}
		return nil
	}
	if _, err := t.q.exec(`INSERT OR IGNORE INTO event_works (work_id, sequence) VALUES (?, ?)`, workID, seq); err != nil {
		return t.execErr("link event", err)
	}
	return nil
}

// Scopes.

func (t *tx) PutScope(s runtime.Scope) (runtime.Scope, error) {
	if err := runtime.ValidateIdentifier("scope id", s.ID); err != nil {
		return runtime.Scope{}, err
	}
	if err := runtime.ValidateText("scope name", s.Name); err != nil {
		return runtime.Scope{}, err
	}
	if err := runtime.ValidateJSON("scope config", s.Config); err != nil {
		return runtime.Scope{}, err
	}
	s.Config = rawJSON(s.Config)
	s.UpdatedAt = fromNanos(t.stamp())
	_, err := t.q.exec(`INSERT INTO scopes (id, name, config, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, config = excluded.config, updated_at = excluded.updated_at`,
		s.ID, s.Name, blob(s.Config), nanos(s.UpdatedAt))
	if err != nil {
		return runtime.Scope{}, t.execErr("put scope", err)
	}
	return s, nil
}

// Works.

func validateWork(w runtime.Work) error {
	if err := runtime.ValidateIdentifier("work id", w.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{
		{"work scope_id", w.ScopeID}, {"work kind", w.Kind}, {"work binding", w.Binding},
	} {
		if err := runtime.ValidateOptional(f.name, f.value); err != nil {
			return err
		}
	}
	if !w.State.Valid() {
		return fmt.Errorf("%w: work %q has unknown state %q", runtime.ErrInvalid, w.ID, w.State)
	}
	if w.Revision < 0 {
		return fmt.Errorf("%w: work %q has negative revision %d", runtime.ErrInvalid, w.ID, w.Revision)
	}
	if err := runtime.ValidateNames("work correlation key", w.CorrelationKeys); err != nil {
		return err
	}
	if err := runtime.ValidateNames("work grant", w.Grants); err != nil {
		return err
	}
	if err := runtime.ValidateJSON("work display", w.Display); err != nil {
		return err
	}
	return runtime.ValidateJSON("work context", w.Context)
}

func (t *tx) PutWork(w runtime.Work) (runtime.Work, error) {
	if err := t.refuseChange(); err != nil {
		return runtime.Work{}, err
	}
	if err := validateWork(w); err != nil {
		return runtime.Work{}, err
	}
	if w.Revision == 0 {
		return t.createWork(w)
	}
	stored, err := t.Work(w.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return runtime.Work{}, err
	}
	now := fromNanos(t.stamp())
	switch {
	case !exists:
		return runtime.Work{}, fmt.Errorf("%w: work %q (revision %d)", runtime.ErrNotFound, w.ID, w.Revision)
	case stored.Revision != w.Revision:
		return runtime.Work{}, fmt.Errorf("%w: work %q is at revision %d, not %d", runtime.ErrConflict, w.ID, stored.Revision, w.Revision)
	default:
		w.CreatedAt = stored.CreatedAt
	}
	w.Revision++
	w.UpdatedAt = now
	w.Display, w.Context = rawJSON(w.Display), rawJSON(w.Context)
	if len(w.CorrelationKeys) == 0 {
		w.CorrelationKeys = nil
	}
	if len(w.Grants) == 0 {
		w.Grants = nil
	}
	_, err = t.q.exec(`INSERT INTO works (id, scope_id, kind, binding, state, correlation_keys, display, context,
		grants, revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET scope_id = excluded.scope_id, kind = excluded.kind, binding = excluded.binding,
		state = excluded.state, correlation_keys = excluded.correlation_keys, display = excluded.display,
		context = excluded.context, grants = excluded.grants, revision = excluded.revision,
		updated_at = excluded.updated_at`,
		w.ID, w.ScopeID, w.Kind, w.Binding, string(w.State), encodeList(w.CorrelationKeys), blob(w.Display), blob(w.Context),
		encodeList(w.Grants), w.Revision, nanos(w.CreatedAt), nanos(w.UpdatedAt))
	if err != nil {
		return runtime.Work{}, t.execErr("put work", err)
	}
	// The stored row's keys are its work_keys rows: only the keys the
	// update drops are deleted (by primary key; no index by Work is kept)
	// and only those it adds are inserted.
	for _, k := range stored.CorrelationKeys {
		if !slices.Contains(w.CorrelationKeys, k) {
			if _, err := t.q.exec(`DELETE FROM work_keys WHERE key = ? AND work_id = ?`, k, w.ID); err != nil {
				return runtime.Work{}, t.execErr("put work", err)
			}
		}
	}
	for _, k := range w.CorrelationKeys {
		if slices.Contains(stored.CorrelationKeys, k) {
			continue
		}
		if _, err := t.q.exec(`INSERT OR IGNORE INTO work_keys (key, work_id) VALUES (?, ?)`, k, w.ID); err != nil {
			return runtime.Work{}, t.execErr("put work", err)
		}
	}
	if err := t.logChange(runtime.Change{Kind: runtime.ChangeWork, ID: w.ID, ScopeID: w.ScopeID,
		State: w.State, Revision: w.Revision, At: w.UpdatedAt}); err != nil {
		return runtime.Work{}, err
	}
	return w, nil
}

// createWork is PutWork of a new Work (w.Revision 0, validated). Its
// INSERT is the existence check: a Work of the ID makes it fail on the
// key, writing nothing, and only then is the stored one read (for the
// refusal's revision).
func (t *tx) createWork(w runtime.Work) (runtime.Work, error) {
	now := fromNanos(t.stamp())
	w.Revision, w.CreatedAt, w.UpdatedAt = 1, now, now
	w.Display, w.Context = rawJSON(w.Display), rawJSON(w.Context)
	if len(w.CorrelationKeys) == 0 {
		w.CorrelationKeys = nil
	}
	if len(w.Grants) == 0 {
		w.Grants = nil
	}
	_, err := t.q.exec(`INSERT INTO works (id, scope_id, kind, binding, state, correlation_keys, display, context,
		grants, revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.ScopeID, w.Kind, w.Binding, string(w.State), encodeList(w.CorrelationKeys), blob(w.Display), blob(w.Context),
		encodeList(w.Grants), w.Revision, nanos(w.CreatedAt), nanos(w.UpdatedAt))
	if isKeyViolation(err) {
		stored, rerr := t.Work(w.ID)
		if rerr != nil {
			return runtime.Work{}, rerr
		}
		return runtime.Work{}, fmt.Errorf("%w: work %q already exists (revision %d)", runtime.ErrConflict, w.ID, stored.Revision)
	}
	if err != nil {
		return runtime.Work{}, t.execErr("put work", err)
	}
	t.originless = w.ID
	for _, k := range w.CorrelationKeys {
		if _, err := t.q.exec(`INSERT OR IGNORE INTO work_keys (key, work_id) VALUES (?, ?)`, k, w.ID); err != nil {
			return runtime.Work{}, t.execErr("put work", err)
		}
	}
	if err := t.logChange(runtime.Change{Kind: runtime.ChangeWork, ID: w.ID, ScopeID: w.ScopeID,
		State: w.State, Revision: w.Revision, At: w.UpdatedAt}); err != nil {
		return runtime.Work{}, err
	}
	return w, nil
}

// logChange appends c to the change log in the writing transaction, so
// the change commits (or rolls back) with what it records. The
// transaction's Changes are kept until its commit (or a read of the
// change log in it) and written then, changesPerStatement to a
// statement: a push that accepts an Event and creates Work logs both in
// one. The single writer makes AUTOINCREMENT assign Seqs in commit
// order, and in VALUES order within a statement.
func (t *tx) logChange(c runtime.Change) error {
	if err := t.refuseChange(); err != nil {
		return err
	}
	t.changes = append(t.changes, c)
	return nil
}

// changesPerStatement is the most Changes one statement writes.
const changesPerStatement = 16

var changesQueries [changesPerStatement + 1]string

func init() {
	for n := 1; n <= changesPerStatement; n++ {
		changesQueries[n] = `INSERT INTO changes (kind, ref, scope_id, sequence, state, revision, at) VALUES (?, ?, ?, ?, ?, ?, ?)` +
			strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?)`, n-1)
	}
}

// flushChanges writes the Changes logChange kept, in the order logged.
func (t *tx) flushChanges() error {
	for len(t.changes) > 0 {
		n := min(len(t.changes), changesPerStatement)
		args := make([]any, 0, 7*n)
		for _, c := range t.changes[:n] {
			args = append(args, string(c.Kind), c.ID, c.ScopeID, c.Sequence, string(c.State), c.Revision, nanos(c.At))
		}
		if _, err := t.q.exec(changesQueries[n], args...); err != nil {
			return t.execErr("log change", err)
		}
		t.changes = t.changes[n:]
	}
	t.changes = nil
	return nil
}

// Changes implements runtime.ReadTx, seeing the Changes this transaction
// logged so far.
func (t *tx) Changes(after int64, limit int) ([]runtime.Change, error) {
	if err := t.flushChanges(); err != nil {
		return nil, err
	}
	return t.reader.Changes(after, limit)
}

// LatestChange implements runtime.ReadTx, counting the Changes this
// transaction logged so far.
func (t *tx) LatestChange() (int64, error) {
	if err := t.flushChanges(); err != nil {
		return 0, err
	}
	return t.reader.LatestChange()
}

// Timers.

func (t *tx) ArmTimer(tm runtime.Timer) (runtime.Timer, error) {
	if err := runtime.ValidateIdentifier("timer key", tm.Key); err != nil {
		return runtime.Timer{}, err
	}
	for _, f := range []struct{ name, value string }{
		{"timer scope_id", tm.ScopeID}, {"timer work_id", tm.WorkID}, {"timer kind", tm.Kind},
	} {
		if err := runtime.ValidateOptional(f.name, f.value); err != nil {
			return runtime.Timer{}, err
		}
	}
	if tm.Due.IsZero() {
		return runtime.Timer{}, fmt.Errorf("%w: timer %q has no due time", runtime.ErrInvalid, tm.Key)
	}
	if err := runtime.ValidateText("timer recurrence", tm.Recurrence); err != nil {
		return runtime.Timer{}, err
	}
	if err := runtime.ValidateJSON("timer payload", tm.Payload); err != nil {
		return runtime.Timer{}, err
	}
	tm.Due = tm.Due.UTC()
	tm.Payload = rawJSON(tm.Payload)
	tm.ArmedAt = fromNanos(t.stamp())
	_, err := t.q.exec(`INSERT INTO timers (key, scope_id, work_id, kind, due, recurrence, payload, armed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET scope_id = excluded.scope_id, work_id = excluded.work_id, kind = excluded.kind,
		due = excluded.due, recurrence = excluded.recurrence, payload = excluded.payload, armed_at = excluded.armed_at`,
		tm.Key, tm.ScopeID, tm.WorkID, tm.Kind, nanos(tm.Due), tm.Recurrence, blob(tm.Payload), nanos(tm.ArmedAt))
	if err != nil {
		return runtime.Timer{}, t.execErr("arm timer", err)
	}
	return tm, nil
}

func (t *tx) CancelTimer(key string) (bool, error) {
	if err := runtime.ValidateIdentifier("timer key", key); err != nil {
		return false, err
	}
	res, err := t.q.exec(`DELETE FROM timers WHERE key = ?`, key)
	if err != nil {
		return false, t.execErr("cancel timer", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, t.execErr("cancel timer", err)
	}
	return n > 0, nil
}

// Waits.

func (t *tx) PutWait(w runtime.Wait) (runtime.Wait, error) {
	if err := runtime.ValidateIdentifier("wait id", w.ID); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateIdentifier("wait work_id", w.WorkID); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateNames("wait key", w.Keys); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateOptional("wait target", w.Target); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateOptional("wait owner", w.Owner); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateText("wait description", w.Description); err != nil {
		return runtime.Wait{}, err
	}
	if err := runtime.ValidateText("wait progress", w.Progress); err != nil {
		return runtime.Wait{}, err
	}
	if !w.State.Valid() {
		return runtime.Wait{}, fmt.Errorf("%w: wait %q has unknown state %q", runtime.ErrInvalid, w.ID, w.State)
	}
	stored, err := t.Wait(w.ID)
	exists := err == nil
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return runtime.Wait{}, err
	}
	if exists && stored.WorkID != w.WorkID {
		return runtime.Wait{}, fmt.Errorf("%w: wait %q belongs to work %q, not %q", runtime.ErrInvalid, w.ID, stored.WorkID, w.WorkID)
	}
	if w.State == runtime.WaitActive {
		active, err := t.ActiveWait(w.WorkID)
		if err == nil && active.ID != w.ID {
			return runtime.Wait{}, fmt.Errorf("%w: work %q already has active wait %q", runtime.ErrConflict, w.WorkID, active.ID)
		} else if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return runtime.Wait{}, err
		}
	}
	if exists {
		w.CreatedAt = stored.CreatedAt
	} else {
		w.CreatedAt = fromNanos(t.stamp())
	}
	if len(w.Keys) == 0 {
		w.Keys = nil
	}
	wasActive := exists && stored.State == runtime.WaitActive
	w.Deadline, w.ResolvedAt = utc(w.Deadline), utc(w.ResolvedAt)
	_, err = t.q.exec(`INSERT INTO waits (id, work_id, keys, target, description, progress, owner, state,
		deadline, created_at, resolved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET keys = excluded.keys, target = excluded.target,
		description = excluded.description, progress = excluded.progress, owner = excluded.owner,
		state = excluded.state, deadline = excluded.deadline, resolved_at = excluded.resolved_at`,
		w.ID, w.WorkID, encodeList(w.Keys), w.Target, w.Description, w.Progress, w.Owner, string(w.State),
		nanos(w.Deadline), nanos(w.CreatedAt), nanos(w.ResolvedAt))
	if err != nil {
		return runtime.Wait{}, t.execErr("put wait", err)
	}
	// Counted once the row is written, whatever follows.
	switch isActive := w.State == runtime.WaitActive; {
	case isActive && !wasActive:
		t.waitDelta++
	case wasActive && !isActive:
		t.waitDelta--
	}
	if exists {
		if _, err := t.q.exec(`DELETE FROM wait_keys WHERE wait_id = ?`, w.ID); err != nil {
			return runtime.Wait{}, t.execErr("put wait", err)
		}
	}
	for _, k := range w.Keys {
		if _, err := t.q.exec(`INSERT OR IGNORE INTO wait_keys (key, wait_id) VALUES (?, ?)`, k, w.ID); err != nil {
			return runtime.Wait{}, t.execErr("put wait", err)
		}
	}
	return w, nil
}

// WaitsForKey is the reader's, except that a transaction that knows no
// Wait is active reads nothing: a push routed to new Work, where no Wait
// is waiting, spares its key's lookup.
func (t *tx) WaitsForKey(key string) ([]runtime.Wait, error) {
	if t.activeWaits >= 0 && t.activeWaits+t.waitDelta == 0 {
		if t.q.done {
			return nil, errTxDone
		}
		return nil, nil
	}
	return t.reader.WaitsForKey(key)
}

func (t *tx) SetWaitProgress(waitID, owner, progress string) error {
	if err := runtime.ValidateIdentifier("wait id", waitID); err != nil {
		return err
	}
	if err := runtime.ValidateText("wait progress", progress); err != nil {
		return err
	}
	w, err := t.Wait(waitID)
	if err != nil {
		return err
	}
	if w.State != runtime.WaitActive {
		return fmt.Errorf("%w: wait %q is %s, not active", runtime.ErrConflict, waitID, w.State)
	}
	if w.Owner != owner {
		return fmt.Errorf("%w: wait %q is owned by %q, not %q", runtime.ErrConflict, waitID, w.Owner, owner)
	}
	if _, err := t.q.exec(`UPDATE waits SET progress = ? WHERE id = ?`, progress, waitID); err != nil {
		return t.execErr("set wait progress", err)
	}
	return nil
}

// KV.

func (t *tx) KVCommit(b runtime.KVBatch) error {
	if err := runtime.ValidateKVBatch(b); err != nil {
		return err
	}
	var failed []error
	for _, p := range b.Preconditions {
		e, err := t.kvGet(p.Namespace, p.Key)
		found := err == nil
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
		switch {
		case p.Absent && found:
			failed = append(failed, fmt.Errorf("%s/%s is present (version %s), not absent", p.Namespace, p.Key, e.Version))
		case !p.Absent && !found:
			failed = append(failed, fmt.Errorf("%s/%s is absent, not at version %s", p.Namespace, p.Key, p.Version))
		case !p.Absent && e.Version != p.Version:
			failed = append(failed, fmt.Errorf("%s/%s is at version %s, not %s", p.Namespace, p.Key, e.Version, p.Version))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: kv precondition failed: %w", runtime.ErrConflict, errors.Join(failed...))
	}
	for puts := b.Puts; len(puts) > 0; {
		n := min(len(puts), kvPutsPerStatement)
		args := make([]any, 0, 4*n)
		for _, p := range puts[:n] {
			value := p.Value
			if value == nil {
				value = []byte{}
			}
			args = append(args, p.Namespace, []byte(p.Key), value, runtime.KVVersion(value))
		}
		if _, err := t.q.exec(kvPutQuery(n), args...); err != nil {
			return t.execErr("kv commit", err)
		}
		puts = puts[n:]
	}
	for _, d := range b.Deletes {
		if _, err := t.q.exec(`DELETE FROM kv WHERE namespace = ? AND key = ?`, d.Namespace, []byte(d.Key)); err != nil {
			return t.execErr("kv commit", err)
		}
	}
	return nil
}

// kvPutsPerStatement is the most puts one statement writes, so a batch
// of n puts is about n/kvPutsPerStatement statements and there are few
// texts to prepare.
const kvPutsPerStatement = 16

var kvPutQueries [kvPutsPerStatement + 1]string

func init() {
	for n := 1; n <= kvPutsPerStatement; n++ {
		kvPutQueries[n] = `INSERT INTO kv (namespace, key, value, version) VALUES (?, ?, ?, ?)` +
			strings.Repeat(`, (?, ?, ?, ?)`, n-1) +
			` ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, version = excluded.version`
	}
}

// kvPutQuery upserts n entries (a batch's keys are distinct: ValidateKVBatch).
func kvPutQuery(n int) string { return kvPutQueries[n] }

// Artifacts.

func (t *tx) PutArtifact(a runtime.Artifact) (runtime.Artifact, error) {
	if err := runtime.ValidateIdentifier("artifact id", a.ID); err != nil {
		return runtime.Artifact{}, err
	}
	if err := validDigest(a.Digest); err != nil {
		return runtime.Artifact{}, err
	}
	for _, f := range []struct{ name, value string }{
		{"artifact work_id", a.WorkID}, {"artifact execution_id", a.ExecutionID},
		{"artifact name", a.Name}, {"artifact media_type", a.MediaType},
	} {
		if err := runtime.ValidateOptional(f.name, f.value); err != nil {
			return runtime.Artifact{}, err
		}
	}
	if a.Size < 0 {
		return runtime.Artifact{}, fmt.Errorf("%w: artifact %q has negative size", runtime.ErrInvalid, a.ID)
	}
	if _, err := t.Artifact(a.ID); err == nil {
		return runtime.Artifact{}, fmt.Errorf("%w: artifact %q already exists", runtime.ErrConflict, a.ID)
	} else if !errors.Is(err, runtime.ErrNotFound) {
		return runtime.Artifact{}, err
	}
	a.CreatedAt = fromNanos(t.stamp())
	_, err := t.q.exec(`INSERT INTO artifacts (id, work_id, execution_id, name, media_type, digest, size, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.WorkID, a.ExecutionID, a.Name, a.MediaType, a.Digest, a.Size, nanos(a.CreatedAt))
	if err != nil {
		return runtime.Artifact{}, t.execErr("put artifact", err)
	}
	return a, nil
}

// Toolbelt results.

func (t *tx) PutToolResult(r runtime.ToolResult) (runtime.ToolResult, bool, error) {
	if err := runtime.ValidateIdentifier("request id", r.RequestID); err != nil {
		return runtime.ToolResult{}, false, err
	}
	if err := runtime.ValidateOptional("operation", r.Operation); err != nil {
		return runtime.ToolResult{}, false, err
	}
	if err := runtime.ValidateOptional("error code", r.ErrorCode); err != nil {
		return runtime.ToolResult{}, false, err
	}
	if err := runtime.ValidateText("error message", r.ErrorMessage); err != nil {
		return runtime.ToolResult{}, false, err
	}
	if err := runtime.ValidateJSON("result", r.Result); err != nil {
		return runtime.ToolResult{}, false, err
	}
	stored, err := t.ToolResult(r.RequestID)
	if err == nil {
		return stored, false, nil
	}
	if !errors.Is(err, runtime.ErrNotFound) {
		return runtime.ToolResult{}, false, err
	}
	r.Result = rawJSON(r.Result)
	r.CommittedAt = fromNanos(t.stamp())
	_, err = t.q.exec(`INSERT INTO tool_results (request_id, operation, result, error_code, error_message, committed_at)
		VALUES (?, ?, ?, ?, ?, ?)`, r.RequestID, r.Operation, blob(r.Result), r.ErrorCode, r.ErrorMessage, nanos(r.CommittedAt))
	if err != nil {
		return runtime.ToolResult{}, false, t.execErr("put tool result", err)
	}
	return r, true, nil
}
