-- The id of the request that wrote an event, and of the hook deliveries made of it: one
-- push followed across processes (X-Hubsvc-Request-Id on the delivery, the log lines).
ALTER TABLE events ADD COLUMN request_id TEXT;
ALTER TABLE hook_deliveries ADD COLUMN request_id TEXT;
