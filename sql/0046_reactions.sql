-- Reactions (issue 35): GitHub's eight, on an issue or pull request (comment_id 0) or
-- on one of its comments; once per person, kind and subject.
CREATE TABLE reactions (
    id         INTEGER PRIMARY KEY,
    issue_id   INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    comment_id INTEGER NOT NULL DEFAULT 0,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    content    TEXT NOT NULL
        CHECK (content IN ('+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes')),
    created_at TEXT NOT NULL,
    UNIQUE (issue_id, comment_id, user_id, content)
);
CREATE INDEX reactions_user ON reactions(user_id);
-- A page of comments counts its reactions by comment id.
CREATE INDEX reactions_comment ON reactions(comment_id, content);
