-- Chat account linking: one-time link tokens and the chat id -> user links they make.

-- Only the SHA-256 of a link token is kept; the token itself is never stored.
CREATE TABLE chat_link_tokens (
    hash       BLOB PRIMARY KEY,
    chat_id    TEXT NOT NULL,
    -- The account the verification e-mail went to; only that account may redeem it.
    user_id    INTEGER REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at INTEGER NOT NULL,             -- epoch seconds
    used_at    TEXT                          -- set once redeemed: tokens are single use
) WITHOUT ROWID;
CREATE INDEX chat_link_tokens_expiry ON chat_link_tokens(expires_at);
CREATE INDEX chat_link_tokens_user ON chat_link_tokens(user_id);

-- A chat id belongs to at most one account; an account may link several chat ids.
CREATE TABLE chat_links (
    chat_id     TEXT PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    verified    INTEGER NOT NULL DEFAULT 0,  -- only verified links act as the user
    created_at  TEXT NOT NULL,
    verified_at TEXT
) WITHOUT ROWID;
CREATE INDEX chat_links_user ON chat_links(user_id);
