-- Names are indexed word by word, as the query side already splits them: `-`, `_` and `.`
-- separate tokens, so `vault-be71b57345` is found by `be71b57345` and `ada-lovelace` by
-- `lovelace`. A tokenizer cannot be changed in place, so the two indexes are made anew
-- under the same names (the triggers of 0004 name them, and keep working unchanged)
-- and rebuilt from their tables. issues_fts already splits on punctuation.
DROP TABLE repositories_fts;
CREATE VIRTUAL TABLE repositories_fts USING fts5(
    name, description, content='repositories', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2");
INSERT INTO repositories_fts(repositories_fts) VALUES ('rebuild');

DROP TABLE users_fts;
CREATE VIRTUAL TABLE users_fts USING fts5(
    username, name, content='users', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2");
INSERT INTO users_fts(users_fts) VALUES ('rebuild');
