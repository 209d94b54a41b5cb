-- Usage and cost (issue 28): what each turn spent, stored with the write
-- that ends it. A charge names its session but does not go with it: the
-- accounts outlive retention (a charge holds no words of the
-- conversation). cost_usd is NULL when the model had no price: the cost
-- is not known, which is not 0.
CREATE TABLE charges (
    id                INTEGER PRIMARY KEY,
    session_id        TEXT    NOT NULL,
    guide             TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    person            TEXT    NOT NULL,
    channel           TEXT    NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    total_tokens      INTEGER NOT NULL,
    cost_usd          REAL,
    at                INTEGER NOT NULL -- Unix milliseconds
);
CREATE INDEX charges_at ON charges (at);
CREATE INDEX charges_session ON charges (session_id);

-- The running totals budgets read with one lookup: per scope (person,
-- guide, overall), key and period ("day:2026-11-27", "month:2026-11"),
-- added to in the write that stores the charge.
CREATE TABLE tallies (
    scope    TEXT    NOT NULL,
    key      TEXT    NOT NULL,
    period   TEXT    NOT NULL,
    tokens   INTEGER NOT NULL,
    cost_usd REAL    NOT NULL,
    PRIMARY KEY (scope, key, period)
) WITHOUT ROWID;
