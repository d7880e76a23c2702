-- The names security.admins has listed, each applied once: at the first start that sees
-- a name, the account holding it then (if any) gets the administrator flag, and the name
-- is kept here so that no later account with that name (signed up after the start, or
-- after the holder was deleted) gets it too. Grants after that go through the CLI or the
-- API, by account.
CREATE TABLE admin_grants (
    name_key   TEXT PRIMARY KEY,             -- the listed name, lower-cased
    user_id    INTEGER,                      -- the account granted; NULL: none had the name
    applied_at TEXT NOT NULL
);
