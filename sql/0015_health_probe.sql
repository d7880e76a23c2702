-- One row that GET /health rewrites (at most every few seconds) to learn whether a
-- write can succeed: a full disk or a held lock shows there before users hit it.
CREATE TABLE health_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL                      -- epoch seconds of the last probe
);
