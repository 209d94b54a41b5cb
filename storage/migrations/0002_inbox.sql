-- Inputs a session has accepted but not yet taken up: an input is stored
-- here (and its client id in seen_inputs) before the listener is told it
-- was accepted, and leaves in the write that stores it as a message, so a
-- crash in between loses nothing. A restart takes them up in id order.
CREATE TABLE inbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    data        BLOB    NOT NULL,
    received_at INTEGER NOT NULL
);
CREATE INDEX inbox_session ON inbox (session_id, id);

-- pending_turns now holds every open turn, not only those waiting for an
-- approval: a turn is open from its user message until its answer or error
-- is stored, so a restart can tell an interrupted turn from a finished one.
