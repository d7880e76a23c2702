-- foreign_keys: off
-- Repository ids are never handed out twice. An INTEGER PRIMARY KEY without
-- AUTOINCREMENT gives the highest id again once the newest repository is deleted, and a
-- repository's folder (<id // 1000>/<id>.git) and every process's open-repository cache
-- are keyed by that id: a new repository could be served another's leftovers. The table
-- is rebuilt with AUTOINCREMENT (SQLite's documented procedure, run with foreign keys off
-- so dropping the old table cascades to nothing; the runner checks them before COMMIT).
-- PostgreSQL's identity never reuses a value: sql/postgres/0035 changes nothing.
CREATE TABLE repositories_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id        INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    name_key        TEXT NOT NULL,            -- name folded to lower case
    description     TEXT NOT NULL DEFAULT '',
    visibility      TEXT NOT NULL CHECK (visibility IN ('public', 'private')),
    default_branch  TEXT NOT NULL DEFAULT 'main',
    parent_id       INTEGER REFERENCES repositories(id) ON DELETE SET NULL,
    star_count      INTEGER NOT NULL DEFAULT 0,
    fork_count      INTEGER NOT NULL DEFAULT 0,
    next_number     INTEGER NOT NULL DEFAULT 1, -- issues and pull requests share it
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    private_lineage INTEGER NOT NULL DEFAULT 0,
    refs_seen       TEXT,                     -- JSON {ref: oid}, tags peeled
    UNIQUE (owner_id, name_key)
);
INSERT INTO repositories_new (id, owner_id, name, name_key, description, visibility,
                              default_branch, parent_id, star_count, fork_count, next_number,
                              created_at, updated_at, private_lineage, refs_seen)
SELECT id, owner_id, name, name_key, description, visibility, default_branch, parent_id,
       star_count, fork_count, next_number, created_at, updated_at, private_lineage, refs_seen
  FROM repositories;
DROP TABLE repositories;
ALTER TABLE repositories_new RENAME TO repositories;
CREATE INDEX repositories_parent ON repositories(parent_id);

-- The search index's triggers went with the old table; the index itself is keyed by the
-- same ids, so it stays as it is.
CREATE TRIGGER repositories_fts_ai AFTER INSERT ON repositories BEGIN
    INSERT INTO repositories_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
END;
CREATE TRIGGER repositories_fts_ad AFTER DELETE ON repositories BEGIN
    INSERT INTO repositories_fts(repositories_fts, rowid, name, description)
    VALUES ('delete', old.id, old.name, old.description);
END;
CREATE TRIGGER repositories_fts_au AFTER UPDATE OF name, description ON repositories BEGIN
    INSERT INTO repositories_fts(repositories_fts, rowid, name, description)
    VALUES ('delete', old.id, old.name, old.description);
    INSERT INTO repositories_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
END;

-- The counter starts past every id in use (the ids of repositories deleted before this
-- migration are not recorded anywhere; from here on none is handed out again).
INSERT INTO sqlite_sequence (name, seq)
SELECT 'repositories', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'repositories');
UPDATE sqlite_sequence
   SET seq = MAX(seq, COALESCE((SELECT MAX(id) FROM repositories), 0))
 WHERE name = 'repositories';
