-- A personal access token's repository list, by repository id (issue 30): a rename keeps
-- the token on its repository, and a new repository under a deleted one's name is not
-- on it. Deleting a repository or a token deletes its rows. limited = 1 with no rows
-- left is a token limited to none, never one widened to all.
CREATE TABLE token_repositories (
    token_id INTEGER NOT NULL REFERENCES personal_tokens(id) ON DELETE CASCADE,
    repo_id  INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, repo_id)
) WITHOUT ROWID;
CREATE INDEX token_repositories_repo ON token_repositories(repo_id);
ALTER TABLE personal_tokens ADD COLUMN limited INTEGER NOT NULL DEFAULT 0;
UPDATE personal_tokens SET limited = 1 WHERE repositories IS NOT NULL;
-- The names stored so far, as the repositories they name now; a name that matches none
-- is dropped, so a token is limited to fewer repositories, never more. Old names of
-- renamed repositories are not followed: the old check refused them in the API too.
INSERT INTO token_repositories (token_id, repo_id)
SELECT DISTINCT p.id, r.id
FROM personal_tokens p, json_each(p.repositories) j
JOIN users u ON u.username_key = lower(substr(j.value, 1, instr(j.value, '/') - 1))
JOIN repositories r
  ON r.owner_id = u.id AND r.name_key = lower(substr(j.value, instr(j.value, '/') + 1))
WHERE p.repositories IS NOT NULL;
ALTER TABLE personal_tokens DROP COLUMN repositories;
