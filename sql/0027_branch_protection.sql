-- Protected branches: one rule per branch name pattern (a name, or a glob such as
-- release/*) of a repository, as GitHub's branch protection.
CREATE TABLE branch_protections (
    id                 INTEGER PRIMARY KEY,
    repo_id            INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    pattern            TEXT NOT NULL,
    require_pr         INTEGER NOT NULL,   -- changes only through pull requests
    approvals          INTEGER NOT NULL,   -- approvals needed from writers
    contexts           TEXT,               -- JSON list of status contexts; NULL: no checks
    strict             INTEGER NOT NULL,   -- the head must contain the base
    enforce_admins     INTEGER NOT NULL,
    allow_force_pushes INTEGER NOT NULL,
    allow_deletions    INTEGER NOT NULL,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    UNIQUE (repo_id, pattern)
);
