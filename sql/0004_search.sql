-- Full-text indexes kept in step with their tables by triggers, so every create, edit,
-- rename and delete is reflected without the application having to remember.
CREATE VIRTUAL TABLE repositories_fts USING fts5(
    name, description, content='repositories', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2 tokenchars '-_.'");
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

CREATE VIRTUAL TABLE issues_fts USING fts5(
    title, body, content='issues', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2");
CREATE TRIGGER issues_fts_ai AFTER INSERT ON issues BEGIN
    INSERT INTO issues_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER issues_fts_ad AFTER DELETE ON issues BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER issues_fts_au AFTER UPDATE OF title, body ON issues BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
    INSERT INTO issues_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;

CREATE VIRTUAL TABLE users_fts USING fts5(
    username, name, content='users', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2 tokenchars '-'");
CREATE TRIGGER users_fts_ai AFTER INSERT ON users BEGIN
    INSERT INTO users_fts(rowid, username, name) VALUES (new.id, new.username, new.name);
END;
CREATE TRIGGER users_fts_ad AFTER DELETE ON users BEGIN
    INSERT INTO users_fts(users_fts, rowid, username, name) VALUES ('delete', old.id, old.username, old.name);
END;
CREATE TRIGGER users_fts_au AFTER UPDATE OF username, name ON users BEGIN
    INSERT INTO users_fts(users_fts, rowid, username, name) VALUES ('delete', old.id, old.username, old.name);
    INSERT INTO users_fts(rowid, username, name) VALUES (new.id, new.username, new.name);
END;

-- Rows that existed before this migration.
INSERT INTO repositories_fts(repositories_fts) VALUES ('rebuild');
INSERT INTO issues_fts(issues_fts) VALUES ('rebuild');
INSERT INTO users_fts(users_fts) VALUES ('rebuild');
