-- Usage and cost (issue 28): what each turn spent, stored with the write
-- that ends it. A charge names its session but does not go with it: the
-- accounts outlive retention (a charge holds no words of the
-- conversation). cost_usd is NULL when the model had no price: the cost
-- is not known, which is not 0.
CREATE TABLE charges (
    id                bigserial PRIMARY KEY,
    session_id        text    NOT NULL,
    guide             text    NOT NULL,
    model             text    NOT NULL,
    person            text    NOT NULL,
    channel           text    NOT NULL,
    prompt_tokens     bigint  NOT NULL,
    completion_tokens bigint  NOT NULL,
    cached_tokens     bigint  NOT NULL,
    total_tokens      bigint  NOT NULL,
    cost_usd          double precision,
    at                bigint  NOT NULL -- Unix milliseconds
);
CREATE INDEX charges_at ON charges (at);
CREATE INDEX charges_session ON charges (session_id);

-- The running totals budgets read, shared by every replica: per scope
-- (person, guide, overall), key and period ("day:2026-11-27",
-- "month:2026-11"), added to in the write that stores the charge. Each
-- total is kept in up to 16 rows (shard), a replica adding to the row of
-- its own shard: every turn adds to the overall totals, and replicas
-- adding to one row would commit their turns one after the other. A read
-- sums a total's rows: one index range.
CREATE TABLE tallies (
    scope    text     NOT NULL,
    key      text     NOT NULL,
    period   text     NOT NULL,
    shard    smallint NOT NULL,
    tokens   bigint   NOT NULL,
    cost_usd double precision NOT NULL,
    PRIMARY KEY (scope, key, period, shard)
);
