-- Per-repository webhooks. Each hook reads the event log from a cursor of its own
-- (event_cursors name 'hook:<id>') and turns the events it matches into delivery rows.
CREATE TABLE hooks (
    id              INTEGER PRIMARY KEY,
    repo_id         INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    format          TEXT NOT NULL CHECK (format IN ('discord', 'slack', 'json')),
    events          TEXT NOT NULL,              -- JSON array of event types
    branches        TEXT,                       -- glob for push refs; NULL: every branch
    secret          TEXT,                       -- signs bodies; never shown
    active          INTEGER NOT NULL DEFAULT 1,
    disabled_reason TEXT,                       -- why it was set inactive by the server
    failing_since   REAL,                       -- epoch seconds of the first failure since a 2xx
    created_by      INTEGER,
    created_at      TEXT NOT NULL
);
CREATE INDEX hooks_repo ON hooks(repo_id, id);

-- One row per (hook, event): its id is the delivery id the receiver sees, so a retry or
-- a redelivery of the same event carries the same one. Pings have no event.
CREATE TABLE hook_deliveries (
    id               INTEGER PRIMARY KEY,
    hook_id          INTEGER NOT NULL REFERENCES hooks(id) ON DELETE CASCADE,
    event_id         INTEGER,
    guid             TEXT NOT NULL UNIQUE,      -- sent as X-Hubsvc-Delivery
    event_type       TEXT NOT NULL,
    action           TEXT,
    payload          TEXT NOT NULL,             -- the exact body sent
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL NOT NULL,
    last_status      INTEGER,
    last_error       TEXT,
    last_duration_ms INTEGER,
    response_excerpt TEXT,
    created_at       TEXT NOT NULL,
    delivered_at     TEXT,
    UNIQUE (hook_id, event_id)
);
CREATE INDEX hook_deliveries_due ON hook_deliveries(hook_id, status, id);

-- Outgoing e-mail (the chat link verification), retried like webhooks; the body is
-- dropped once the message is sent or given up, as it may hold a one-time link.
CREATE TABLE mail_deliveries (
    id              INTEGER PRIMARY KEY,
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    message         BLOB,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT
);
CREATE INDEX mail_deliveries_due ON mail_deliveries(status, next_attempt_at);
