-- Recall (issue 24): the text of every person's and the assistant's
-- message, indexed for full-text search (SQLite FTS5); rowid is the
-- message's id. created_at is when a message was stored (0 for the
-- messages stored before this migration: their time is not known).
ALTER TABLE messages ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO messages_fts (rowid, text)
    SELECT id, json_extract(data, '$.content') FROM messages
    WHERE role IN ('user', 'assistant') AND COALESCE(json_extract(data, '$.content'), '') != '';
