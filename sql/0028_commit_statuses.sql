-- Commit statuses from CI, as GitHub's: many per commit, the latest per context counts.
CREATE TABLE commit_statuses (
    id          INTEGER PRIMARY KEY,
    repo_id     INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    sha         TEXT NOT NULL,
    state       TEXT NOT NULL,       -- pending, success, failure, error
    context     TEXT NOT NULL,
    target_url  TEXT,
    description TEXT,
    creator_id  INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX commit_statuses_sha ON commit_statuses(repo_id, sha, context, id);
CREATE INDEX commit_statuses_creator ON commit_statuses(creator_id);
