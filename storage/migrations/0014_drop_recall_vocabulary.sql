-- messages_vocab (0013) counted a common word's messages by reading its
-- whole list, which cost more than it saved; a search counts up to its
-- bound instead (storage.Search).
DROP TABLE messages_vocab;
