-- Pushes are journalled so a server killed while receive-pack runs still records what
-- landed: a row per push in flight, and each repository's refs as last recorded. At
-- start, a push left in flight is reconciled from the difference.
ALTER TABLE repositories ADD COLUMN refs_seen TEXT;   -- JSON {ref: oid}, tags peeled
CREATE TABLE pushes_in_flight (
    id         INTEGER PRIMARY KEY,
    repo_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    actor_id   INTEGER,
    started_at TEXT NOT NULL
);
CREATE INDEX pushes_in_flight_repo ON pushes_in_flight(repo_id);
