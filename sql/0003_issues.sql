-- Issues and pull requests (one number sequence per repository), comments, assignees.
CREATE TABLE issues (
    id            INTEGER PRIMARY KEY,
    repo_id       INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    number        INTEGER NOT NULL,
    is_pull       INTEGER NOT NULL DEFAULT 0,
    title         TEXT NOT NULL,
    body          TEXT NOT NULL DEFAULT '',
    state         TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    author_id     INTEGER REFERENCES users(id) ON DELETE SET NULL,
    labels        TEXT NOT NULL DEFAULT '[]',  -- JSON array of strings
    comment_count INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    closed_at     TEXT,
    UNIQUE (repo_id, number)
);
CREATE INDEX issues_list ON issues(repo_id, is_pull, state, number);

CREATE TABLE issue_assignees (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    user_id  INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    PRIMARY KEY (issue_id, user_id)
) WITHOUT ROWID;

CREATE TABLE pulls (
    issue_id      INTEGER PRIMARY KEY REFERENCES issues(id) ON DELETE CASCADE,
    head_repo_id  INTEGER REFERENCES repositories(id) ON DELETE SET NULL,
    head          TEXT NOT NULL,
    base          TEXT NOT NULL,
    head_oid      TEXT,               -- heads the stored mergeable was computed for
    base_oid      TEXT,
    mergeable     INTEGER,            -- 1, 0, or NULL while unknown
    merged        INTEGER NOT NULL DEFAULT 0,
    merged_at     TEXT,
    merged_by     INTEGER REFERENCES users(id) ON DELETE SET NULL,
    merge_commit  TEXT
);
CREATE INDEX pulls_head ON pulls(head_repo_id, head);
CREATE INDEX pulls_base ON pulls(base);

CREATE TABLE comments (
    id         INTEGER PRIMARY KEY,
    issue_id   INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    author_id  INTEGER REFERENCES users(id) ON DELETE SET NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX comments_issue ON comments(issue_id, id);
