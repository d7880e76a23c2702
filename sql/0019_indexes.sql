-- Indexes for a team's real size (issue 14).

-- Foreign keys whose child column had no index: deleting a user or a delivery made
-- SQLite walk the whole child table once per deleted row (ON DELETE SET NULL/CASCADE),
-- and a user's deletion hands their issues, comments and merges to the ghost by these.
CREATE INDEX IF NOT EXISTS issues_author ON issues(author_id);
CREATE INDEX IF NOT EXISTS issue_assignees_user ON issue_assignees(user_id);
CREATE INDEX IF NOT EXISTS pulls_merged_by ON pulls(merged_by);
CREATE INDEX IF NOT EXISTS comments_author ON comments(author_id);
CREATE INDEX IF NOT EXISTS webhook_deliveries_redelivery ON webhook_deliveries(redelivery_of);

-- Every one-word search is a prefix query ("the" is the*): without a prefix index FTS5
-- merges the doclists of every word that starts so. Two- and three-letter prefixes are
-- indexed; the table is made anew under the same name (the triggers of 0004 name it and
-- keep working) and rebuilt from issues, as 0010 did for the other two.
DROP TABLE issues_fts;
CREATE VIRTUAL TABLE issues_fts USING fts5(
    title, body, content='issues', content_rowid='id',
    tokenize="unicode61 remove_diacritics 2", prefix='2 3');
INSERT INTO issues_fts(issues_fts) VALUES ('rebuild');
