-- Pull request reviews, as GitHub's: a state, a body, line comments, and the head commit
-- they were given on (a later push makes an approval stale; the review keeps its commit).
CREATE TABLE reviews (
    id         INTEGER PRIMARY KEY,
    issue_id   INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    user_id    INTEGER REFERENCES users(id) ON DELETE SET NULL,
    state      TEXT NOT NULL,           -- APPROVED, CHANGES_REQUESTED, COMMENTED
    body       TEXT NOT NULL,
    commit_id  TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX reviews_issue ON reviews(issue_id, user_id, id);
CREATE INDEX reviews_user ON reviews(user_id);

CREATE TABLE review_comments (
    id         INTEGER PRIMARY KEY,
    review_id  INTEGER NOT NULL REFERENCES reviews(id) ON DELETE CASCADE,
    path       TEXT NOT NULL,
    line       INTEGER NOT NULL,
    side       TEXT NOT NULL,           -- LEFT (the base) or RIGHT (the head)
    body       TEXT NOT NULL
);
CREATE INDEX review_comments_review ON review_comments(review_id);
