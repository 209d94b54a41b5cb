-- When a session last finished a turn, for retention (storage.retention):
-- sessions idle for longer are deleted with everything they hold.
ALTER TABLE sessions ADD COLUMN active_at INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET active_at = created_at;
CREATE INDEX sessions_active ON sessions (active_at);
