-- Event ids come from this counter, taken last in each event-writing transaction
-- (store/log.py): a sequence hands out ids in call order, not commit order.
INSERT INTO event_log_state (name, value)
SELECT 'last_event_id', COALESCE((SELECT MAX(id) FROM events), 0);
