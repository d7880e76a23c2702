-- Repositories, collaborators and stars.
CREATE TABLE repositories (
    id             INTEGER PRIMARY KEY,
    owner_id       INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    name_key       TEXT NOT NULL,            -- name folded to lower case
    description    TEXT NOT NULL DEFAULT '',
    visibility     TEXT NOT NULL CHECK (visibility IN ('public', 'private')),
    default_branch TEXT NOT NULL DEFAULT 'main',
    parent_id      INTEGER REFERENCES repositories(id) ON DELETE SET NULL,
    star_count     INTEGER NOT NULL DEFAULT 0,
    fork_count     INTEGER NOT NULL DEFAULT 0,
    next_number    INTEGER NOT NULL DEFAULT 1, -- issues and pull requests share it
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    UNIQUE (owner_id, name_key)
);
CREATE INDEX repositories_parent ON repositories(parent_id);

CREATE TABLE collaborators (
    repo_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    permission TEXT NOT NULL CHECK (permission IN ('read', 'write', 'admin')),
    created_at TEXT NOT NULL,
    PRIMARY KEY (repo_id, user_id)
) WITHOUT ROWID;
CREATE INDEX collaborators_user ON collaborators(user_id);

CREATE TABLE stars (
    repo_id    INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY (repo_id, user_id)
);
CREATE INDEX stars_user ON stars(user_id);
