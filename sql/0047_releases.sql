-- Releases and their assets (issue 35). An asset's id names its file under
-- <data>/assets/<repo_id>/, so ids are never handed out twice (AUTOINCREMENT).
CREATE TABLE releases (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id          INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    tag_name         TEXT NOT NULL,
    target_commitish TEXT NOT NULL,
    name             TEXT NOT NULL DEFAULT '',
    body             TEXT NOT NULL DEFAULT '',
    draft            INTEGER NOT NULL DEFAULT 0,
    prerelease       INTEGER NOT NULL DEFAULT 0,
    author_id        INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at       TEXT NOT NULL,
    published_at     TEXT,
    UNIQUE (repo_id, tag_name)
);
CREATE INDEX releases_list ON releases(repo_id, draft, published_at);
CREATE INDEX releases_author ON releases(author_id);

CREATE TABLE release_assets (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id     INTEGER NOT NULL REFERENCES releases(id) ON DELETE CASCADE,
    repo_id        INTEGER NOT NULL,
    name           TEXT NOT NULL,
    content_type   TEXT NOT NULL,
    size           INTEGER NOT NULL,
    download_count INTEGER NOT NULL DEFAULT 0,
    uploader_id    INTEGER REFERENCES users(id) ON DELETE SET NULL,
    created_at     TEXT NOT NULL,
    UNIQUE (release_id, name)
);
CREATE INDEX release_assets_uploader ON release_assets(uploader_id);
