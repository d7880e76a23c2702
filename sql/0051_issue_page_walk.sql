-- A list page's offset walk over every state (`state=all`, the default sort) reads the
-- repository's issues or pull requests by number in this index alone (the rowid, the
-- issue id, is in every SQLite index): with (repo_id, number) it read each skipped
-- row's is_pull from the table (benchmarks/README.md, issue 34 item 3, round 4).
CREATE INDEX issues_walk ON issues(repo_id, is_pull, number);
