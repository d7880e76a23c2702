-- Issue 32, items 4 and 5: sign-in tokens become sessions their owner can see and end
-- (an id to name one by, when and from where it was last used), and security events get
-- an append-only log.

-- tokens was WITHOUT ROWID, keyed by its digest: rebuilt with an id that is never handed
-- out again (AUTOINCREMENT), since a session's id is what DELETE names.
CREATE TABLE tokens_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    hash         BLOB NOT NULL UNIQUE,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    expires_at   INTEGER NOT NULL,             -- epoch seconds
    last_seen_at TEXT,
    ip           TEXT,
    user_agent   TEXT
);
INSERT INTO tokens_new (hash, user_id, created_at, expires_at)
SELECT hash, user_id, created_at, expires_at FROM tokens ORDER BY created_at;
DROP TABLE tokens;
ALTER TABLE tokens_new RENAME TO tokens;
CREATE INDEX tokens_user ON tokens(user_id);
CREATE INDEX tokens_expiry ON tokens(expires_at);

-- No foreign keys: an entry outlives the account, organization or repository it names
-- (their names are kept as they were then).
CREATE TABLE security_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    action     TEXT NOT NULL,
    actor_id   INTEGER,                        -- who did it (NULL: nobody signed in)
    actor_name TEXT,
    user_id    INTEGER,                        -- the person it was done to, if any
    user_name  TEXT,
    owner_id   INTEGER,                        -- the organization (or repository owner) it concerns
    owner_name TEXT,
    repo_id    INTEGER,
    repo_name  TEXT,
    ip         TEXT,
    user_agent TEXT,
    data       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX security_log_actor ON security_log(actor_id, id);
CREATE INDEX security_log_user ON security_log(user_id, id);
CREATE INDEX security_log_owner ON security_log(owner_id, id);
CREATE INDEX security_log_time ON security_log(created_at);
