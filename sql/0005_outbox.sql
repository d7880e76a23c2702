-- The durable outbox of chat webhook deliveries and the attempts made for each.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    guid            TEXT NOT NULL UNIQUE,      -- sent as X-Hubsvc-Delivery; receivers drop repeats
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    repo_id         INTEGER,
    payload         TEXT NOT NULL,             -- the exact JSON body sent
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,             -- epoch seconds
    last_status     INTEGER,
    last_error      TEXT,
    redelivery_of   INTEGER REFERENCES webhook_deliveries(id) ON DELETE SET NULL,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, id);

CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY,
    delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    at          TEXT NOT NULL,
    status_code INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, id);
