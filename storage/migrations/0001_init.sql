-- Times are INTEGER Unix milliseconds (UTC): compact, sortable, and free of
-- the driver's time-text formats.

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    -- NULL rather than '' when a session has no natural key, so the unique
    -- index below only constrains sessions that have one.
    key               TEXT,
    guide             TEXT    NOT NULL DEFAULT '',
    owner             TEXT    NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX sessions_key ON sessions (key) WHERE key IS NOT NULL;

CREATE TABLE members (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    author_key TEXT NOT NULL,
    role       TEXT NOT NULL,
    PRIMARY KEY (session_id, author_key)
) WITHOUT ROWID;

-- No foreign key on events: they are written in batches shared by many
-- sessions, and one bad row must not roll back everyone else's.
CREATE TABLE events (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    time       INTEGER NOT NULL,
    type       TEXT    NOT NULL,
    agent      TEXT    NOT NULL DEFAULT '',
    data       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

CREATE TABLE messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       TEXT NOT NULL,
    data       TEXT NOT NULL
);
-- The sliding window reads this index backwards from its end: O(window).
CREATE INDEX messages_session ON messages (session_id, id);

CREATE TABLE pending_turns (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    data       BLOB    NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE seen_inputs (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    client_id  TEXT    NOT NULL,
    seen_at    INTEGER NOT NULL,
    PRIMARY KEY (session_id, client_id)
) WITHOUT ROWID;
