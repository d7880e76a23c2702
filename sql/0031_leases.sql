-- Work that must run once (webhook, hook and mail sending, the durable event consumers,
-- periodic jobs) runs on the process holding the `jobs` lease; each process also keeps a
-- `process:<holder>` row alive while it runs, so others can tell when it is gone. Times
-- are epoch seconds. A delivery being sent is claimed by its sender first (claimed_by),
-- so no two processes send it; a push in flight names the process running it (holder).
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at REAL NOT NULL
);
ALTER TABLE pushes_in_flight ADD COLUMN holder TEXT;
ALTER TABLE hook_deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE mail_deliveries ADD COLUMN claimed_by TEXT;
-- The lease holder asks every half second which hooks have deliveries due.
CREATE INDEX hook_deliveries_pending ON hook_deliveries(next_attempt_at) WHERE status = 'pending';
