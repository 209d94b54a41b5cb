-- Tools an approver allowed for the rest of a session ("Always allow"):
-- a JSON array of tool names, '' for none.
ALTER TABLE sessions ADD COLUMN allowed_tools TEXT NOT NULL DEFAULT '';
