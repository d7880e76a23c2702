-- PostgreSQL twin of sql/0051_issue_page_walk.sql: the id is an INCLUDE column, so a
-- page's offset walk is an index-only scan (10,000 issues, offset 7,000: 1,730 buffers
-- and 14 ms walking (repo_id, number) with a heap fetch per row for is_pull). The
-- state lists likewise: issues_list again, with the id.
CREATE INDEX issues_walk ON issues(repo_id, is_pull, number) INCLUDE (id);
DROP INDEX issues_list;
CREATE INDEX issues_list ON issues(repo_id, is_pull, state, number) INCLUDE (id);
