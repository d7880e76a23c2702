-- A merge in progress holds its pull request: claimed in the database before the base
-- branch moves, so two merges (or a merge and a close) can't both win, whichever
-- process runs them. Seconds since the epoch; a claim older than the stale limit is
-- treated as abandoned (its process died).
ALTER TABLE pulls ADD COLUMN merging_since INTEGER;
