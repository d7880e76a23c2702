-- PostgreSQL twin of sql/0033_token_repository_ids.sql (json_each is SQLite's).
CREATE TABLE token_repositories (
    token_id BIGINT NOT NULL REFERENCES personal_tokens(id) ON DELETE CASCADE,
    repo_id  BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, repo_id)
);
CREATE INDEX token_repositories_repo ON token_repositories(repo_id);
ALTER TABLE personal_tokens ADD COLUMN limited BIGINT NOT NULL DEFAULT 0;
UPDATE personal_tokens SET limited = 1 WHERE repositories IS NOT NULL;
INSERT INTO token_repositories (token_id, repo_id)
SELECT DISTINCT p.id, r.id
FROM personal_tokens p
CROSS JOIN LATERAL json_array_elements_text(p.repositories::json) AS j(value)
JOIN users u ON u.username_key = lower(split_part(j.value, '/', 1))
JOIN repositories r
  ON r.owner_id = u.id AND r.name_key = lower(substr(j.value, strpos(j.value, '/') + 1))
WHERE p.repositories IS NOT NULL;
ALTER TABLE personal_tokens DROP COLUMN repositories;
