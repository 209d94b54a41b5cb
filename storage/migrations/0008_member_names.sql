-- Who a member is to the others (/who): the name they last used, and when
-- they were last seen (wrote, or closed their last place on the session),
-- in Unix milliseconds (0 for never).
ALTER TABLE members ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE members ADD COLUMN last_seen INTEGER NOT NULL DEFAULT 0;
