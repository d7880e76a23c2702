-- Accounts, sessions and user settings.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    username      TEXT NOT NULL,
    username_key  TEXT NOT NULL UNIQUE,      -- username folded to lower case
    email         TEXT NOT NULL,
    email_key     TEXT NOT NULL UNIQUE,      -- e-mail case-folded
    name          TEXT NOT NULL DEFAULT '',
    password_hash TEXT NOT NULL,
    is_admin      INTEGER NOT NULL DEFAULT 0,
    bio           TEXT NOT NULL DEFAULT '',
    location      TEXT NOT NULL DEFAULT '',
    website       TEXT NOT NULL DEFAULT '',
    preferences   TEXT NOT NULL DEFAULT '{}', -- JSON object
    avatar_hash   TEXT,                       -- sha256 of the uploaded avatar, NULL for none
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE avatars (
    user_id      INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    content_type TEXT NOT NULL,
    data         BLOB NOT NULL
);

-- Only the SHA-256 of a token is kept; the token itself is never stored.
CREATE TABLE tokens (
    hash       BLOB PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at INTEGER NOT NULL              -- epoch seconds
) WITHOUT ROWID;
CREATE INDEX tokens_user ON tokens(user_id);
CREATE INDEX tokens_expiry ON tokens(expires_at);
