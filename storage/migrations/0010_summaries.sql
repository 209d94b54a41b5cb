-- Conversations that last (issue 24): a session compacted by its guide's
-- memory policy keeps the summary of its messages through through_id; its
-- context is the summary and the messages after it. The messages
-- themselves stay: the history is whole, only the model's context is not.
CREATE TABLE summaries (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    through_id INTEGER NOT NULL,
    text       TEXT NOT NULL
);
