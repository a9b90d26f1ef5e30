package sqlite

// migrations are applied in order; schema_version records how many ran.
// Never edit a released migration: append a new one.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE scopes (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	config     BLOB,
	updated_at INTEGER NOT NULL
);

CREATE TABLE events (
	sequence    INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	source      TEXT NOT NULL,
	delivery_id TEXT NOT NULL,
	scope_id    TEXT NOT NULL,
	family      TEXT NOT NULL,
	type        TEXT NOT NULL,
	schema      TEXT NOT NULL,
	payload     BLOB,
	parent      TEXT NOT NULL,
	root        TEXT NOT NULL,
	depth       INTEGER NOT NULL,
	works       TEXT NOT NULL,
	occurred_at INTEGER NOT NULL,
	accepted_at INTEGER NOT NULL,
	signature   TEXT NOT NULL,
	UNIQUE (source, delivery_id)
);
CREATE INDEX events_by_scope ON events (scope_id, sequence);

CREATE TABLE event_works (
	work_id  TEXT NOT NULL,
	sequence INTEGER NOT NULL REFERENCES events (sequence),
	PRIMARY KEY (work_id, sequence)
) WITHOUT ROWID;

CREATE TABLE works (
	id               TEXT PRIMARY KEY,
	scope_id         TEXT NOT NULL,
	kind             TEXT NOT NULL,
	binding          TEXT NOT NULL,
	state            TEXT NOT NULL,
	correlation_keys TEXT NOT NULL,
	display          BLOB,
	context          BLOB,
	grants           TEXT NOT NULL,
	revision         INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
);
CREATE INDEX works_by_scope ON works (scope_id, id);
CREATE INDEX works_by_state ON works (state, id);

CREATE TABLE work_keys (
	key     TEXT NOT NULL,
	work_id TEXT NOT NULL,
	PRIMARY KEY (key, work_id)
) WITHOUT ROWID;
CREATE INDEX work_keys_by_work ON work_keys (work_id);

CREATE TABLE leases (
	name       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	released   INTEGER NOT NULL
);

CREATE TABLE executions (
	id         TEXT PRIMARY KEY,
	work_id    TEXT NOT NULL,
	attempt    INTEGER NOT NULL,
	executor   TEXT NOT NULL,
	lease      TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	state      TEXT NOT NULL,
	recovery   BLOB,
	error      TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX executions_by_work ON executions (work_id, attempt);

CREATE TABLE waits (
	id          TEXT PRIMARY KEY,
	work_id     TEXT NOT NULL,
	keys        TEXT NOT NULL,
	target      TEXT NOT NULL,
	description TEXT NOT NULL,
	progress    TEXT NOT NULL,
	owner       TEXT NOT NULL,
	state       TEXT NOT NULL,
	deadline    INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	resolved_at INTEGER NOT NULL
);
CREATE INDEX waits_by_work ON waits (work_id, created_at);
CREATE UNIQUE INDEX waits_one_active ON waits (work_id) WHERE state = 'active';

CREATE TABLE wait_keys (
	key     TEXT NOT NULL,
	wait_id TEXT NOT NULL,
	PRIMARY KEY (key, wait_id)
) WITHOUT ROWID;
CREATE INDEX wait_keys_by_wait ON wait_keys (wait_id);

CREATE TABLE timers (
	key        TEXT PRIMARY KEY,
	scope_id   TEXT NOT NULL,
	work_id    TEXT NOT NULL,
	kind       TEXT NOT NULL,
	due        INTEGER NOT NULL,
	recurrence TEXT NOT NULL,
	payload    BLOB,
	armed_at   INTEGER NOT NULL
);
CREATE INDEX timers_by_due ON timers (due, key);

CREATE TABLE kv (
	namespace TEXT NOT NULL,
	key       BLOB NOT NULL,
	value     BLOB NOT NULL,
	version   TEXT NOT NULL,
	PRIMARY KEY (namespace, key)
) WITHOUT ROWID;

CREATE TABLE artifacts (
	id           TEXT PRIMARY KEY,
	work_id      TEXT NOT NULL,
	execution_id TEXT NOT NULL,
	name         TEXT NOT NULL,
	media_type   TEXT NOT NULL,
	digest       TEXT NOT NULL,
	size         INTEGER NOT NULL,
	created_at   INTEGER NOT NULL
);
CREATE INDEX artifacts_by_work ON artifacts (work_id, id);

CREATE TABLE tool_results (
	request_id    TEXT PRIMARY KEY,
	operation     TEXT NOT NULL,
	result        BLOB,
	error_code    TEXT NOT NULL,
	error_message TEXT NOT NULL,
	committed_at  INTEGER NOT NULL
);
`,
	// 2: the change log (runtime.Change), seeded with the Events already
	// accepted so a stream from 0 sees the whole log.
	`
CREATE TABLE changes (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	kind     TEXT NOT NULL,
	ref      TEXT NOT NULL,
	scope_id TEXT NOT NULL,
	sequence INTEGER NOT NULL,
	state    TEXT NOT NULL,
	revision INTEGER NOT NULL,
	at       INTEGER NOT NULL
);
INSERT INTO changes (kind, ref, scope_id, sequence, state, revision, at)
	SELECT 'event', id, scope_id, sequence, '', 0, accepted_at FROM events ORDER BY sequence;
`,
	// 3: leases and executions are kept in their primary key's b-tree
	// (WITHOUT ROWID), so a write of one touches one b-tree, not the
	// table and its key's index; executions are indexed by Work alone
	// (its few attempts are sorted when read), so an update, which never
	// changes the Work, writes no index.
	`
CREATE TABLE leases_v3 (
	name       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	released   INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO leases_v3 (name, holder, epoch, expires_at, released)
	SELECT name, holder, epoch, expires_at, released FROM leases;
DROP TABLE leases;
ALTER TABLE leases_v3 RENAME TO leases;

CREATE TABLE executions_v3 (
	id         TEXT PRIMARY KEY,
	work_id    TEXT NOT NULL,
	attempt    INTEGER NOT NULL,
	executor   TEXT NOT NULL,
	lease      TEXT NOT NULL,
	epoch      INTEGER NOT NULL,
	state      TEXT NOT NULL,
	recovery   BLOB,
	error      TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO executions_v3 (id, work_id, attempt, executor, lease, epoch, state, recovery, error,
	started_at, ended_at, updated_at)
	SELECT id, work_id, attempt, executor, lease, epoch, state, recovery, error,
	started_at, ended_at, updated_at FROM executions;
DROP TABLE executions;
ALTER TABLE executions_v3 RENAME TO executions;
CREATE INDEX executions_by_work ON executions (work_id);
`,
	// 4: works is kept in its primary key's b-tree (WITHOUT ROWID): a Work's
	// creation writes that b-tree and the indexes by scope and by state,
	// not a rowid table and its key's index besides, and a read by ID is
	// one descent instead of two. A Work row is mostly small; a large
	// display or context spills to overflow pages sooner than in a rowid
	// table, a cost only such Work pays. Nothing refers to works by rowid
	// or by foreign key.
	`
CREATE TABLE works_v4 (
	id               TEXT PRIMARY KEY,
	scope_id         TEXT NOT NULL,
	kind             TEXT NOT NULL,
	binding          TEXT NOT NULL,
	state            TEXT NOT NULL,
	correlation_keys TEXT NOT NULL,
	display          BLOB,
	context          BLOB,
	grants           TEXT NOT NULL,
	revision         INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO works_v4 (id, scope_id, kind, binding, state, correlation_keys, display, context,
	grants, revision, created_at, updated_at)
	SELECT id, scope_id, kind, binding, state, correlation_keys, display, context,
	grants, revision, created_at, updated_at FROM works;
DROP TABLE works;
ALTER TABLE works_v4 RENAME TO works;
CREATE INDEX works_by_scope ON works (scope_id, id);
CREATE INDEX works_by_state ON works (state, id);
`,
	// 5: work_keys is not indexed by Work: a Work's update deletes the
	// keys it drops by primary key, the stored row naming them, so a
	// Work's creation writes its keys' b-tree alone.
	`
DROP INDEX IF EXISTS work_keys_by_work;
`,
	// 6: a Work records the Event that created it (origin, its sequence),
	// written in the row its creation just wrote, so the creating link
	// writes no event_works page; 0 where none is recorded (Work from
	// before, or not created by routing), whose links are all in
	// event_works. A later migration that rebuilds works (as 4 did) must
	// carry origin over, or a routed Work loses its creating Event.
	`
ALTER TABLE works ADD COLUMN origin INTEGER NOT NULL DEFAULT 0;
`,
}
