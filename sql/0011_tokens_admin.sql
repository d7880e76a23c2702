-- Personal access tokens, disabled accounts, and the ghost that keeps a deleted
-- user's issues and comments (as GitHub's @ghost does).
ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN is_ghost INTEGER NOT NULL DEFAULT 0;

-- Only the SHA-256 of a token is kept; the secret is shown once, when it is made.
CREATE TABLE personal_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    hash         BLOB NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    expires_at   INTEGER,                     -- epoch seconds; NULL: never
    last_used_at TEXT,
    UNIQUE (user_id, name)
);

-- Ids of deleted accounts: a new account never gets one back (users.id has no
-- AUTOINCREMENT, and SQLite would hand out the highest id again once its row is gone).
CREATE TABLE deleted_users (
    id         INTEGER PRIMARY KEY,
    deleted_at TEXT NOT NULL
);

-- The ghost: disabled, never an administrator, and its password hash is of a random
-- secret nobody kept. It takes the name "ghost" unless an account already has it.
INSERT INTO users (username, username_key, email, email_key, name, password_hash, is_admin,
                   disabled, is_ghost, created_at, updated_at)
SELECT n, lower(n), '', '', 'Deleted user',
       '$2b$12$iwxlFd877a26c0BSaorOu.HQZq5S/IaPlYcleRaYJe88l/4iOlv7m', 0, 1, 1,
       strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), strftime('%Y-%m-%dT%H:%M:%SZ', 'now')
  FROM (SELECT CASE WHEN EXISTS (SELECT 1 FROM users WHERE username_key = 'ghost')
                    THEN 'ghost-' || lower(hex(randomblob(3))) ELSE 'ghost' END AS n);
