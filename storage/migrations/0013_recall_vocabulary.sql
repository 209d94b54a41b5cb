-- How many messages hold each word (issue 24): a search leaves out the
-- words too common to tell messages apart, so its cost stays bounded
-- however long the conversations (storage.Search).
CREATE VIRTUAL TABLE messages_vocab USING fts5vocab(messages_fts, 'row');
