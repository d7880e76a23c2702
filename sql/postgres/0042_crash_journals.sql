-- PostgreSQL twin of sql/0042_crash_journals.sql (ids are BIGINT here).
-- A merge in progress: claimed with its pull request (merging_since), then, just before
-- the base branch moves, the tip it moves from and to. A process that dies holding one
-- leaves the row: the merge is finished (merged, its events) when the branch moved,
-- and undone (the claim freed) when it did not.
CREATE TABLE merges_in_flight (
    issue_id   BIGINT PRIMARY KEY REFERENCES pulls(issue_id) ON DELETE CASCADE,
    repo_id    BIGINT NOT NULL,
    actor_id   BIGINT,
    holder     TEXT,                 -- the process running it (its heartbeat: leases)
    method     TEXT NOT NULL,
    base_oid   TEXT,                 -- NULL until the merge commit is written
    head_oid   TEXT,
    new_oid    TEXT,                 -- what the base branch moves to
    started_at TEXT NOT NULL
);
-- A repository whose row is committed but whose folder is not made yet (no 201 sent):
-- a process that dies there leaves the row, removed by recovery, so the name is free.
CREATE TABLE repos_in_creation (
    repo_id    BIGINT PRIMARY KEY REFERENCES repositories(id) ON DELETE CASCADE,
    holder     TEXT,
    started_at TEXT NOT NULL
);
