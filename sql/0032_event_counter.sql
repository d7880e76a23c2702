-- Event ids come from this counter, taken last in each event-writing transaction
-- (store/log.py), on SQLite as on PostgreSQL where a sequence is not commit order. It
-- starts past every id AUTOINCREMENT ever gave, so no id is reused.
INSERT INTO event_log_state (name, value)
SELECT 'last_event_id', MAX(COALESCE((SELECT MAX(id) FROM events), 0),
                            COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0));
