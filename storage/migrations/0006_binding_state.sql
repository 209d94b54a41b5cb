-- A listener's own note about a place, kept with its binding: what it had
-- under way there when it stopped (a Slack stream it had started), so a
-- restart can finish it.
ALTER TABLE bindings ADD COLUMN state TEXT NOT NULL DEFAULT '';
