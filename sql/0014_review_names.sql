-- Comments remember being edited (GitHub shows "edited"; timestamps have one-second
-- resolution, so comparing them would miss an edit made in the comment's first second).
ALTER TABLE comments ADD COLUMN edited INTEGER NOT NULL DEFAULT 0;

-- A renamed repository's old names, so API paths redirect and git URLs keep working
-- until a new repository of the owner takes the name (then the row goes).
CREATE TABLE repo_redirects (
    owner_id   INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name_key   TEXT NOT NULL,              -- the old name, lower case
    repo_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY (owner_id, name_key)
) WITHOUT ROWID;
CREATE INDEX repo_redirects_repo ON repo_redirects(repo_id);

-- The issue list's filters: by updated time (since, sort=updated) within a repository.
CREATE INDEX issues_updated ON issues(repo_id, is_pull, updated_at);
