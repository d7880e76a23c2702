-- The notifications inbox (issue 35); see sql/0043_notifications.sql.
CREATE TABLE issue_subscriptions (
    issue_id   BIGINT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    user_id    BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    subscribed BIGINT NOT NULL DEFAULT 1,
    ignored    BIGINT NOT NULL DEFAULT 0,
    reason     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (issue_id, user_id)
);
CREATE INDEX issue_subscriptions_user ON issue_subscriptions(user_id);

CREATE TABLE notification_threads (
    -- An identity never reuses a value, as SQLite's AUTOINCREMENT.
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    issue_id     BIGINT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    repo_id      BIGINT NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
    reason       TEXT NOT NULL,
    unread       BIGINT NOT NULL DEFAULT 1,
    updated_at   TEXT NOT NULL,
    last_read_at TEXT,
    event_id     BIGINT NOT NULL,
    comment_id   BIGINT,
    UNIQUE (user_id, issue_id)
);
CREATE INDEX notification_threads_inbox ON notification_threads(user_id, updated_at);
CREATE INDEX notification_threads_issue ON notification_threads(issue_id);
CREATE INDEX notification_threads_repo ON notification_threads(repo_id);
