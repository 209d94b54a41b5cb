-- Bindings tie a place in a channel (a Slack thread or DM, a Discord
-- thread) to the session shown there. The listener of that channel renders
-- every event of the session into the place, whoever caused it, and keeps
-- rendered_seq: after a restart it goes on from there. A place shows one
-- session; a session may be shown in many places.
CREATE TABLE bindings (
    channel      TEXT    NOT NULL,
    address      TEXT    NOT NULL,
    session_id   TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    rendered_seq INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (channel, address)
);
CREATE INDEX bindings_session ON bindings (session_id);
