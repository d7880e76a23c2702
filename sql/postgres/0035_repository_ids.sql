-- SQLite's 0035 rebuilds repositories with AUTOINCREMENT so an id is never handed out
-- twice; PostgreSQL's identity column (0029_schema.sql) never reuses a value already.
SELECT 1;
