-- Inbound chat webhook requests already accepted, by the SHA-256 of their signature
-- (which covers the timestamp and the body): a captured request replayed within the
-- timestamp tolerance is refused. Rows older than the tolerance are pruned on insert,
-- since the timestamp check alone refuses those.
CREATE TABLE webhook_inbound_seen (
    signature BLOB PRIMARY KEY,
    seen_at   INTEGER NOT NULL               -- epoch seconds
) WITHOUT ROWID;
CREATE INDEX webhook_inbound_seen_at ON webhook_inbound_seen(seen_at);
