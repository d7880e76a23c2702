-- Organizations and teams (issue 24). An organization is a row of users (is_org = 1),
-- so its name lives in the users' namespace and it owns repositories as a user does;
-- it cannot sign in. Its description is the row's bio.
ALTER TABLE users ADD COLUMN is_org INTEGER NOT NULL DEFAULT 0;

-- Members and owners; since_event: the newest event before the membership began (a
-- grant does not open the private past, as collaborators.since_event).
CREATE TABLE org_members (
    org_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    user_id     INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('member', 'owner')),
    since_event INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_members_user ON org_members(user_id);

CREATE TABLE teams (
    id          INTEGER PRIMARY KEY,
    org_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    name_key    TEXT NOT NULL,       -- name folded to lower case
    description TEXT NOT NULL DEFAULT '',
    permission  TEXT NOT NULL CHECK (permission IN ('read', 'triage', 'write', 'maintain', 'admin')),
    created_at  TEXT NOT NULL,
    UNIQUE (org_id, name_key)
);

CREATE TABLE team_members (
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    user_id     INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    since_event INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members(user_id);

-- A team's repositories; permission NULL: the team's own.
CREATE TABLE team_repos (
    team_id     INTEGER NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
    repo_id     INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    permission  TEXT CHECK (permission IN ('read', 'triage', 'write', 'maintain', 'admin')),
    since_event INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (team_id, repo_id)
);
CREATE INDEX team_repos_repo ON team_repos(repo_id);
