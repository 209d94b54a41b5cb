-- Explicit memories (issue 24): what a person asked the assistant to
-- remember about them. A memory is its owner's (an author key), offered to
-- the model in their conversations only, and deleted for good by /forget.
CREATE TABLE memories (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    text       TEXT NOT NULL,
    session_id TEXT NOT NULL,
    channel    TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX memories_owner ON memories (owner, created_at);
