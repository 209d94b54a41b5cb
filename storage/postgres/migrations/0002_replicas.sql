-- Several gateways on one database (issue 27).

-- Leases: who runs what. expires_at is the database's clock (Unix
-- milliseconds), never a replica's. epoch counts the holdings: it grows by
-- one every time a lease is taken anew, and a conversation's writes carry
-- the epoch their runner holds (see switchboard_fence).
CREATE TABLE leases (
    name       text   PRIMARY KEY,
    holder     text   NOT NULL,
    epoch      bigint NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX leases_holder ON leases (holder);

-- The replicas, as their heartbeats say.
CREATE TABLE replicas (
    id         text PRIMARY KEY,
    host       text   NOT NULL DEFAULT '',
    started_at bigint NOT NULL,
    seen_at    bigint NOT NULL
);

-- switchboard_fence refuses (SQLSTATE SB001) a write made under a lease
-- that its writer no longer holds: the row must still name holder and
-- epoch. FOR SHARE holds the row until the write commits, so a takeover
-- (which updates the row) waits for a write in flight, and a write that
-- comes after the takeover sees the new holder and is refused.
CREATE FUNCTION switchboard_fence(lease text, holder text, epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM leases l WHERE l.name = lease AND l.holder = switchboard_fence.holder
        AND l.epoch = switchboard_fence.epoch FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease % is no longer held by % at epoch %', lease, holder, epoch
            USING ERRCODE = 'SB001';
    END IF;
END
$$;

-- switchboard_stored refuses (SQLSTATE SB002) a write that needs a
-- session's event seq stored when it is not: events are stored without a
-- gap, so seq is stored exactly when its row is there.
CREATE FUNCTION switchboard_stored(session text, seq bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    last bigint;
BEGIN
    IF seq <= 0 OR EXISTS (SELECT 1 FROM events e WHERE e.session_id = session AND e.seq = switchboard_stored.seq) THEN
        RETURN;
    END IF;
    SELECT COALESCE(max(e.seq), 0) INTO last FROM events e WHERE e.session_id = session;
    RAISE EXCEPTION 'event %/% is not stored (the last is %)', session, seq, last
        USING ERRCODE = 'SB002';
END
$$;

-- switchboard_found refuses (SQLSTATE SB003) a write whose row is missing:
-- n is the rows a statement of the same write changed.
CREATE FUNCTION switchboard_found(n bigint, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF n = 0 THEN
        RAISE EXCEPTION '% not found', what USING ERRCODE = 'SB003';
    END IF;
END
$$;
