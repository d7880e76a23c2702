-- Milestones (issue 35): numbered per repository from their own counter, as on GitHub.
-- An issue or pull request belongs to at most one; its open/closed counts are counted
-- from issues_milestone when read, so they follow issue state with nothing to keep.
CREATE TABLE milestones (
    id          INTEGER PRIMARY KEY,
    repo_id     INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    number      INTEGER NOT NULL,
    title       TEXT NOT NULL,
    title_key   TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    due_on      TEXT,
    state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    creator_id  INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    closed_at   TEXT,
    UNIQUE (repo_id, number),
    UNIQUE (repo_id, title_key)
);
CREATE INDEX milestones_creator ON milestones(creator_id);
ALTER TABLE repositories ADD COLUMN next_milestone INTEGER NOT NULL DEFAULT 1;
ALTER TABLE issues ADD COLUMN milestone_id INTEGER REFERENCES milestones(id) ON DELETE SET NULL;
CREATE INDEX issues_milestone ON issues(milestone_id, state);

-- Labels as objects with a colour. Issues keep their label names (the contract's
-- strings); a name an issue carries gets its object on first use, and the labels issues
-- carried before this migration get theirs here, with GitHub's default grey.
CREATE TABLE labels (
    id          INTEGER PRIMARY KEY,
    repo_id     INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    name_key    TEXT NOT NULL,
    color       TEXT NOT NULL DEFAULT 'ededed',
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    UNIQUE (repo_id, name_key)
);
INSERT INTO labels (repo_id, name, name_key, color, description, created_at)
SELECT i.repo_id, MIN(j.value), lower(j.value), 'ededed', '', MIN(i.created_at)
  FROM issues i, json_each(i.labels) j
 GROUP BY i.repo_id, lower(j.value);
