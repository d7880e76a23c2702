-- SSH public keys (issue 31): an account's keys, and deploy keys of one repository. A
-- key belongs to exactly one account or one repository, never two: its fingerprint is
-- unique over both. key is the canonical "kind base64" line, without the comment.
-- read_only matters for deploy keys only (an account key is as strong as its account).
CREATE TABLE ssh_keys (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER REFERENCES users(id) ON DELETE CASCADE,
    repo_id      INTEGER REFERENCES repositories(id) ON DELETE CASCADE,
    title        TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL UNIQUE,
    read_only    INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    CHECK ((user_id IS NULL) <> (repo_id IS NULL))
);
CREATE INDEX ssh_keys_user ON ssh_keys(user_id);
CREATE INDEX ssh_keys_repo ON ssh_keys(repo_id);
