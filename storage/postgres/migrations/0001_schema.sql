-- The schema the SQLite store (storage/migrations) reaches after all of
-- its migrations, in PostgreSQL's types. Times are bigint Unix
-- milliseconds (UTC), as there, so the code maps column for column.

-- switchboard_fold is text as recall indexes and searches it: accents
-- gone (NFD, then the combining marks dropped: "Café" is "cafe"), lower
-- case, and every run of what is neither a letter nor a digit one space,
-- so PostgreSQL's text parser sees words and nothing else (no e-mail
-- addresses, hosts or paths as one token, as storage.Search's tokenizer
-- sees none). Lower case and letters are taken from ICU where the server
-- has it, else from C.utf8, so that a database created with the C locale
-- still folds letters beyond ASCII; a query is folded by the same
-- function, so what is indexed and what is searched always agree. Only
-- the first 100,000 characters of a message are indexed: a tsvector holds
-- at most 1 MiB, and a longer message's index would fail its write.
DO $fold$
DECLARE
    coll text;
BEGIN
    SELECT quote_ident(collname) INTO coll FROM pg_collation
    WHERE collname IN ('und-x-icu', 'C.utf8', 'C.UTF-8')
    ORDER BY collname = 'und-x-icu' DESC, collname LIMIT 1;
    EXECUTE format($f$
        CREATE FUNCTION switchboard_fold(t text) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $body$
            SELECT lower(regexp_replace(
                regexp_replace(normalize(left(t, 100000), NFD),
                    '[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]', '', 'g') %1$s,
                '[^[:alnum:]]+', ' ', 'g') %1$s)
        $body$ $f$, CASE WHEN coll IS NULL THEN '' ELSE 'COLLATE ' || coll END);
END
$fold$;

-- switchboard_content is a stored message's text (its JSON's "content").
-- \u0000, which PostgreSQL's text cannot hold, reads as U+FFFD: a message
-- with a NUL in it is still stored and indexed. (Replacing the six
-- characters is safe inside any JSON: where they are an escaped backslash
-- and "u0000", they become one and "ufffd".)
CREATE FUNCTION switchboard_content(data text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
    SELECT NULLIF(replace(data, '\u0000', '\ufffd')::json ->> 'content', '')
$$;

-- switchboard_json is data as jsonb, or NULL where it is not JSON: a row
-- this gateway did not write must not fail a whole query.
CREATE FUNCTION switchboard_json(data text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE RETURNS NULL ON NULL INPUT AS $$
BEGIN
    RETURN data::jsonb;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

CREATE TABLE sessions (
    id                text PRIMARY KEY,
    -- NULL rather than '' when a session has no natural key, so the unique
    -- index below only constrains sessions that have one.
    key               text,
    guide             text   NOT NULL DEFAULT '',
    owner             text   NOT NULL DEFAULT '',
    created_at        bigint NOT NULL,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    total_tokens      bigint NOT NULL DEFAULT 0,
    -- When the session last finished a turn, for retention.
    active_at         bigint NOT NULL DEFAULT 0,
    -- Tools an approver allowed for the rest of the session: a JSON array
    -- of names, '' for none.
    allowed_tools     text   NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX sessions_key ON sessions (key) WHERE key IS NOT NULL;
CREATE INDEX sessions_active ON sessions (active_at);

CREATE TABLE members (
    session_id text    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    author_key text    NOT NULL,
    role       text    NOT NULL,
    name       text    NOT NULL DEFAULT '',
    last_seen  bigint  NOT NULL DEFAULT 0,
    pinned     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (session_id, author_key)
);
-- Recall searches the conversations a person is a member of.
CREATE INDEX members_author ON members (author_key);

-- No foreign key on events: they are written in batches shared by many
-- sessions, and a session's events may come before its row.
CREATE TABLE events (
    session_id text   NOT NULL,
    seq        bigint NOT NULL,
    time       bigint NOT NULL,
    type       text   NOT NULL,
    agent      text   NOT NULL DEFAULT '',
    data       text   NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE messages (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id text   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       text   NOT NULL,
    data       text   NOT NULL,
    -- When the message was stored.
    created_at bigint NOT NULL DEFAULT 0,
    -- Recall: a person's and the assistant's text, for full-text search
    -- (storage.Search); NULL for every other message.
    recall     tsvector GENERATED ALWAYS AS (
        CASE WHEN role IN ('user', 'assistant')
        THEN to_tsvector('simple'::regconfig, switchboard_fold(switchboard_content(data))) END
    ) STORED
);
-- The sliding window reads this index backwards from its end: O(window).
CREATE INDEX messages_session ON messages (session_id, id);
CREATE INDEX messages_recall ON messages USING gin (recall);

CREATE TABLE pending_turns (
    session_id text   PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    data       bytea  NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE seen_inputs (
    session_id text   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    client_id  text   NOT NULL,
    seen_at    bigint NOT NULL,
    PRIMARY KEY (session_id, client_id)
);

-- Inputs a session has accepted but not yet taken up.
CREATE TABLE inbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  text   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    data        bytea  NOT NULL,
    received_at bigint NOT NULL
);
CREATE INDEX inbox_session ON inbox (session_id, id);

-- A place in a channel and the session shown there.
CREATE TABLE bindings (
    channel      text    NOT NULL,
    address      text    NOT NULL,
    session_id   text    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    rendered_seq bigint  NOT NULL DEFAULT 0,
    created_at   bigint  NOT NULL,
    state        text    NOT NULL DEFAULT '',
    by_invite    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (channel, address)
);
CREATE INDEX bindings_session ON bindings (session_id);

-- Invitations into a shared session; a code only as its SHA-256.
CREATE TABLE invites (
    code_hash  text    PRIMARY KEY,
    session_id text    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       text    NOT NULL,
    uses_left  bigint  NOT NULL,
    expires_at bigint  NOT NULL,
    created_by text    NOT NULL,
    created_at bigint  NOT NULL,
    revoked    boolean NOT NULL DEFAULT false
);
CREATE INDEX invites_session ON invites (session_id);

-- A compacted session's summary of its messages through through_id.
CREATE TABLE summaries (
    session_id text   PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    through_id bigint NOT NULL,
    text       text   NOT NULL
);

-- What a person asked the assistant to remember about them.
CREATE TABLE memories (
    id         text   PRIMARY KEY,
    owner      text   NOT NULL,
    text       text   NOT NULL,
    session_id text   NOT NULL,
    channel    text   NOT NULL,
    created_at bigint NOT NULL
);
CREATE INDEX memories_owner ON memories (owner, created_at);

-- Semantic recall: a message's vector (little-endian float32) of a space.
CREATE TABLE message_vectors (
    message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    space      text   NOT NULL,
    vector     bytea  NOT NULL
);
