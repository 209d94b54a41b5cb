-- Semantic recall (issue 24): a vector for each person's and the
-- assistant's message, made by the configured embedding model (space names
-- it, with its dimensions: providers.Embedder.Space), as little-endian
-- float32 of unit length; an empty vector marks a message that has nothing
-- to embed. A vector goes with its message: deleting the message (and so
-- its session, by retention) deletes it.
CREATE TABLE message_vectors (
    message_id INTEGER PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    space      TEXT NOT NULL,
    vector     BLOB NOT NULL
);
-- Recall searches the conversations a person is a member of: find them by
-- the person (members' key starts with the session).
CREATE INDEX members_author ON members (author_key);
