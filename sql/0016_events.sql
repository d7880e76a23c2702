-- The event log: one row per event, written in the transaction of the change it
-- describes; ids increase in commit order (one writer), and every consumer (WebSocket
-- hub, webhooks, the feed) reads it from a cursor of its own.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    type       TEXT NOT NULL,
    action     TEXT,
    repo_id    INTEGER REFERENCES repositories(id) ON DELETE SET NULL,
    actor_id   INTEGER,
    payload    TEXT NOT NULL,            -- the event as the API shows it, without its id
    created_at TEXT NOT NULL
);
CREATE INDEX events_repo ON events(repo_id, id);
CREATE INDEX events_created ON events(created_at);

-- Small facts about the log: how far pruning has gone (a cursor below it answers 410).
CREATE TABLE event_log_state (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO event_log_state (name, value) VALUES ('pruned_through', 0);

-- Where a durable consumer (the server-wide chat webhook) has read the log up to; moved
-- in the transaction that records what it made of the event, so a restart resumes there.
CREATE TABLE event_cursors (
    name     TEXT PRIMARY KEY,
    event_id INTEGER NOT NULL
);
