-- Invitations into a shared session (/share). A code is stored only as
-- its SHA-256: the table never holds what would let someone in.
CREATE TABLE invites (
    code_hash  TEXT    PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       TEXT    NOT NULL,
    uses_left  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX invites_session ON invites (session_id);
