-- Trust in shared places (issue 21).
-- by_invite: the place was bound by an invite code (a join): only the
-- conversation's people act there; anyone else who can read the thread is
-- refused. 0 for a place bound to the conversation it started.
ALTER TABLE bindings ADD COLUMN by_invite INTEGER NOT NULL DEFAULT 0;
-- pinned: the owner set this role with /role; a configured approver list,
-- a token's role or an invite code does not change it.
ALTER TABLE members ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
