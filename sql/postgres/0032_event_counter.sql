-- Event ids come from this sequence, taken under a transaction-level advisory lock, last
-- in each event-writing transaction (store/engines/postgres.py reserve_event_ids): the
-- lock is held until commit, so ids are commit order. A plain sequence is not (it hands
-- out ids in call order), and a counter row under SERIALIZABLE makes every concurrent
-- writer fail and retry its whole change.
CREATE SEQUENCE events_id_seq;
SELECT setval('events_id_seq', GREATEST(COALESCE((SELECT MAX(id) FROM events), 0), 1),
              COALESCE((SELECT MAX(id) FROM events), 0) > 0);
